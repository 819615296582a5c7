"""A local Hugging Face checkpoint as a policy, sampled with transformers on CPU or GPU."""

from __future__ import annotations

import inspect
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ..errors import PolicyError
from ..policy import Completion, Policy, Sampling
from .in_process import completion, eos_ids, token_budget


class HFPolicy(Policy):
    """Samples a checkpoint token by token with the KV cache, keeping the exact tokens and logprobs.

    Logprobs are those of the distribution sampled from: log-softmax of logits / temperature,
    taken before top-p filtering, so every token has one and a trainer recomputes it from a plain
    forward pass. Greedy decoding (temperature 0) reports the model's own log-softmax.

    Stop strings end a turn like vLLM does: `token_ids` keep every sampled token, including the
    one that completed the stop string, while `text` is cut before it.
    """

    streams_tokens = True

    def __init__(self, path: str | Path, device: str = "auto", dtype: str | torch.dtype = "auto"):
        path = Path(path)
        if not (path / "config.json").is_file():
            raise PolicyError(
                f"no Hugging Face checkpoint at {path} (config.json is missing): pass a directory "
                "written by save_pretrained, e.g. one made by `harness model init-tiny DIR`"
            )
        self.name = str(path)
        self.device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            model = AutoModelForCausalLM.from_pretrained(path, dtype=_torch_dtype(dtype))
        except Exception as exc:  # any failure here means the directory is not a usable checkpoint
            raise PolicyError(f"cannot load the checkpoint at {path}: {exc}") from exc
        self.model = model.to(self.device).eval()
        self.eos_ids = eos_ids(self.model.generation_config.eos_token_id, self.tokenizer.eos_token_id)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else min(self.eos_ids)
        self.context = getattr(self.model.config, "max_position_embeddings", None)
        # transformers 5.2x renamed the KV-cache argument (and output field) from past_key_values to cache.
        self._cache_arg = "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"

    def generate_ids(self, prompt_ids: list[int], sampling: Sampling) -> Completion:
        return self.generate_ids_batch([prompt_ids], sampling)[0]

    @torch.inference_mode()
    def generate_ids_batch(
        self,
        prompts: list[list[int]],
        sampling: Sampling,
        seeds: list[int | None] | None = None,
        listeners: list | None = None,
    ) -> list[Completion]:
        """One turn per prompt, sampled together (left padding). Row i is seeded with seeds[i] when given,
        else with sampling.seed + i, so a batch reproduces the unbatched calls with those seeds. A listener
        (listeners[i], or None) is called with row i's tokens so far each time one is sampled."""
        limits = [self._token_budget(prompt, sampling.max_tokens) for prompt in prompts]
        input_ids, mask = self._left_pad(prompts)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        seeds = sampling.row_seeds(len(prompts)) if seeds is None else seeds
        generators = [None if seed is None else torch.Generator(device=self.device).manual_seed(seed) for seed in seeds]
        tokens: list[list[int]] = [[] for _ in prompts]
        logprobs: list[list[float]] = [[] for _ in prompts]
        reasons: list[str | None] = [None for _ in prompts]
        cache = None
        while None in reasons:
            out = self.model(
                input_ids=input_ids,
                attention_mask=mask,
                position_ids=positions,
                use_cache=True,
                logits_to_keep=1,
                **{self._cache_arg: cache},
            )
            cache = getattr(out, self._cache_arg)
            new_tokens, new_logprobs = _sample(out.logits[:, -1].float(), sampling, generators)
            for i, (token, logprob) in enumerate(zip(new_tokens.tolist(), new_logprobs.tolist())):
                if reasons[i] is None:
                    tokens[i].append(token)
                    logprobs[i].append(logprob)
                    reasons[i] = self._finish_reason(tokens[i], limits[i], sampling.stop)
                    if listeners and listeners[i]:
                        listeners[i](tokens[i])
            input_ids = new_tokens[:, None]
            mask = torch.cat([mask, mask.new_ones(len(prompts), 1)], dim=-1)
            positions = positions[:, -1:] + 1
        return [
            self._completion(len(prompt), ids, lps, reason, sampling.stop)
            for prompt, ids, lps, reason in zip(prompts, tokens, logprobs, reasons)
        ]

    def load_weights(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Copy tensors into the model in place: all of its weights or any subset of them."""
        unknown = set(state_dict) - set(self.model.state_dict())
        if unknown:
            raise PolicyError(f"{self.name} has no weights named {sorted(unknown)[:5]}: a state dict of another model?")
        self.model.load_state_dict(state_dict, strict=False)

    def _token_budget(self, prompt: list[int], max_tokens: int) -> int:
        return token_budget(self.name, self.context, prompt, max_tokens)

    def _left_pad(self, prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(map(len, prompts))
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            input_ids[row, width - len(prompt) :] = torch.tensor(prompt)
            mask[row, width - len(prompt) :] = 1
        return input_ids.to(self.device), mask.to(self.device)

    def _finish_reason(self, ids: list[int], limit: int, stops: list[str]) -> str | None:
        if ids[-1] in self.eos_ids or any(self._ends_in(ids, stop) for stop in stops):
            return "stop"
        return "length" if len(ids) >= limit else None

    def _ends_in(self, ids: list[int], stop: str) -> bool:
        # Every token holds at least one byte, so a stop string that the newest token completed
        # lies within the last len(stop in bytes) tokens: decode only those.
        return stop in self.tokenizer.decode(ids[-len(stop.encode()) :], skip_special_tokens=False)

    def _completion(
        self, prompt_len: int, ids: list[int], logprobs: list[float], reason: str, stops: list[str]
    ) -> Completion:
        return completion(self.tokenizer, self.eos_ids, prompt_len, ids, logprobs, reason, stops)


def _torch_dtype(dtype: str | torch.dtype) -> str | torch.dtype:
    """ "auto" (the checkpoint's own dtype), a torch dtype, or its name ("bfloat16")."""
    return getattr(torch, dtype) if isinstance(dtype, str) and dtype != "auto" else dtype


def _sample(
    logits: torch.Tensor, sampling: Sampling, generators: list[torch.Generator | None]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Next token of each row and its logprob under the distribution sampled from (before top-p)."""
    if sampling.temperature <= 0:
        logprobs = logits.log_softmax(-1)
        tokens = logits.argmax(-1)
    else:
        logprobs = (logits / sampling.temperature).log_softmax(-1)
        probs = _top_p(logprobs.exp(), sampling.top_p)
        tokens = torch.cat([torch.multinomial(p, 1, generator=g) for p, g in zip(probs, generators)])
    return tokens, logprobs.gather(-1, tokens[:, None]).squeeze(-1)


def _top_p(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero all but the smallest set of most likely tokens whose mass reaches top_p (at least one)."""
    if top_p >= 1:
        return probs
    sorted_probs, order = probs.sort(-1, descending=True)
    drop = sorted_probs.cumsum(-1) - sorted_probs >= top_p
    drop[:, 0] = False
    return probs.scatter(-1, order, sorted_probs.masked_fill(drop, 0))

"""In-process vLLM (GPU, the `vllm` extra): the rollout engine for large models.

Same interface as `HFPolicy`: continue exact token ids, return the sampled ids and their
logprobs. Logprobs are asked for after temperature scaling (`logprobs_mode=
"processed_logprobs"`, vLLM >= 0.10) so that they match what the trainer computes.
Not exercised on the CPU machines this project is tested on; see the README.
"""

from __future__ import annotations

from typing import Any

from ..errors import PolicyError
from ..policy import Completion, Policy, Sampling


class VLLMPolicy(Policy):
    def __init__(self, path: str, gpu_memory_utilization: float = 0.85, tensor_parallel_size: int = 1, **engine_args: Any):
        try:
            from vllm import LLM
        except ImportError:
            raise PolicyError("vLLM is not installed: `pip install 'harness[vllm]'` on a machine with a GPU") from None
        self.name = path
        options = dict(model=path, gpu_memory_utilization=gpu_memory_utilization, tensor_parallel_size=tensor_parallel_size,
                       enable_prefix_caching=True, logprobs_mode="processed_logprobs", **engine_args)
        try:
            self.llm = LLM(**options)
        except TypeError:  # older vLLM without logprobs_mode: logprobs are of the raw distribution
            options.pop("logprobs_mode")
            self.llm = LLM(**options)
        self.tokenizer = self.llm.get_tokenizer()

    def generate(self, messages, tools, sampling: Sampling) -> Completion:
        from ..tokens import render

        return self.generate_ids(list(render(self.tokenizer, messages, tools, True, True)), sampling)

    def generate_ids(self, prompt_ids: list[int], sampling: Sampling) -> Completion:
        return self.generate_ids_batch([prompt_ids], sampling)[0]

    def generate_ids_batch(self, prompts: list[list[int]], sampling: Sampling, seeds: list[int | None] | None = None) -> list[Completion]:
        """As `HFPolicy.generate_ids_batch`: row i seeded with seeds[i], else with sampling.seed + i."""
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        seeds = sampling.row_seeds(len(prompts)) if seeds is None else seeds
        params = [SamplingParams(temperature=sampling.temperature, top_p=sampling.top_p, max_tokens=sampling.max_tokens,
                                 seed=seed, stop=sampling.stop or None, logprobs=0, skip_special_tokens=False) for seed in seeds]
        outputs = self.llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in prompts], params, use_tqdm=False)
        completions = []
        for prompt, output in zip(prompts, outputs):
            sample = output.outputs[0]
            ids = list(sample.token_ids)
            logprobs = [step[token].logprob for step, token in zip(sample.logprobs, ids)]
            text = self.tokenizer.decode(ids, skip_special_tokens=False).removesuffix("<|im_end|>")
            completions.append(Completion(text=text, finish_reason=sample.finish_reason or "stop", token_ids=ids, logprobs=logprobs,
                                          prompt_tokens=len(prompt), completion_tokens=len(ids)))
        return completions

    def load_weights(self, state_dict: dict[str, Any]) -> None:
        """Weight sync from the learner: the model's own `load_weights` on each worker."""
        items = list(state_dict.items())
        self.llm.collective_rpc(lambda worker: worker.model_runner.model.load_weights(items))
        self.llm.reset_prefix_cache()

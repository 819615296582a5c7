"""Inference engines behind one interface; `harness.batching.BatchingEngine` batches their requests."""

from __future__ import annotations

from harness.policy import Policy

from .errors import ConfigError


def load_engine(backend: str, model_path: str, **vllm_options) -> Policy:
    """The rollout engine for `inference.backend`: transformers (CPU or GPU) or vLLM (GPU, with `vllm_options`)."""
    if backend == "transformers":
        from harness.policies.hf import HFPolicy

        return HFPolicy(model_path)
    if backend == "vllm":
        from harness.policies.vllm_engine import VLLMPolicy

        return VLLMPolicy(model_path, **vllm_options)
    raise ConfigError(f"inference.backend: {backend!r} is not one of transformers, vllm")

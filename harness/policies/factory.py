"""`--checkpoint` values to policies."""

from __future__ import annotations

from pathlib import Path

from ..errors import PolicyError
from ..policy import Policy
from .scripted import EmptyPolicy, GoldPolicy, ReplayPolicy

HELP = "gold, gold-no-tools, empty, replay:PATH, a Hugging Face checkpoint folder, or endpoint:MODEL (with --base-url)"


ENGINES = ("auto", "transformers", "vllm")


def make_policy(checkpoint: str, base_url: str | None = None, device: str = "auto", engine: str = "auto") -> Policy:
    """`engine` picks what samples a checkpoint folder: transformers, vllm, or auto (vLLM on a GPU when installed)."""
    if engine not in ENGINES:
        raise PolicyError(f"--engine {engine!r} is not one of {', '.join(ENGINES)}")
    if checkpoint in ("gold", "gold-no-tools"):
        return GoldPolicy(use_tools=checkpoint == "gold")
    if checkpoint == "empty":
        return EmptyPolicy()
    if checkpoint.startswith("replay:"):
        return ReplayPolicy(checkpoint.removeprefix("replay:"))
    if checkpoint.startswith("endpoint:"):
        from .endpoint import EndpointPolicy

        return EndpointPolicy(checkpoint.removeprefix("endpoint:"), base_url=base_url)
    path = Path(checkpoint).expanduser()
    if path.is_dir():
        if engine == "vllm" or (engine == "auto" and _vllm_usable()):
            from .vllm_engine import VLLMPolicy

            return VLLMPolicy(str(path))
        from .hf import HFPolicy

        return HFPolicy(str(path), device=device)
    raise PolicyError(f"--checkpoint {checkpoint!r} is none of: {HELP}")


def _vllm_usable() -> bool:
    try:
        import torch
        import vllm  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available()

"""`--checkpoint` values to policies.

A value is `NAME` or `NAME:ARGUMENT` of a registered policy factory (`gold`, `empty`,
`replay:PATH`, `endpoint:MODEL`, or your own through `register_policy`), a Hugging Face
checkpoint folder or GGUF file (imported by harness.checkpoints), or a `module:Name` path to a Policy class (called with no arguments) or
factory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from infra.plugins import Registry, import_path

from ..checkpoints import is_gguf, resolve_checkpoint
from ..errors import PolicyError
from ..policy import Policy
from .scripted import EmptyPolicy, GoldPolicy, ReplayPolicy

HELP = "gold, gold-no-tools, empty, replay:PATH, a Hugging Face checkpoint folder or GGUF file, endpoint:MODEL (with --base-url), or module:Name"

PolicyFactory = Callable[..., Policy]  # (argument after the colon, **options) -> Policy
POLICIES: Registry[PolicyFactory] = Registry("policy", "harness.policies")
register_policy = POLICIES.register


ENGINES = ("auto", "transformers", "vllm")


@register_policy("gold")
def _gold(argument: str = "", **options) -> Policy:
    return GoldPolicy(use_tools=True)


@register_policy("gold-no-tools")
def _gold_no_tools(argument: str = "", **options) -> Policy:
    return GoldPolicy(use_tools=False)


@register_policy("empty")
def _empty(argument: str = "", **options) -> Policy:
    return EmptyPolicy()


@register_policy("replay")
def _replay(argument: str = "", **options) -> Policy:
    return ReplayPolicy(argument)


@register_policy("endpoint")
def _endpoint(argument: str = "", base_url: str | None = None, endpoint_limits=None, **options) -> Policy:
    from .endpoint import EndpointPolicy

    return EndpointPolicy(argument, base_url=base_url, limits=endpoint_limits)


def make_policy(
    checkpoint: str, base_url: str | None = None, device: str = "auto", engine: str = "auto", endpoint_limits=None
) -> Policy:
    """The policy a `--checkpoint` value names; `endpoint_limits` (EndpointLimits) bound endpoint calls;
    `engine` picks what samples a checkpoint folder: transformers, vllm, or auto (vLLM on a GPU when installed)."""
    if engine not in ENGINES:
        raise PolicyError(f"--engine {engine!r} is not one of {', '.join(ENGINES)}")
    name, _, argument = checkpoint.partition(":")
    if name in POLICIES:
        return POLICIES.get(name)(argument, base_url=base_url, device=device, endpoint_limits=endpoint_limits)
    if is_gguf(checkpoint):
        return checkpoint_policy(resolve_checkpoint(checkpoint), engine, device=device)
    path = Path(checkpoint).expanduser()
    if path.is_dir():
        return checkpoint_policy(path, engine, device=device)
    if argument and "/" not in name:
        policy = import_path(checkpoint, "policy")()
        if not isinstance(policy, Policy):
            raise PolicyError(f"--checkpoint {checkpoint!r} made a {type(policy).__name__}, not a harness Policy")
        return policy
    raise PolicyError(f"--checkpoint {checkpoint!r} is none of: {HELP}")


def checkpoint_policy(path: str | Path, engine: str = "auto", device: str = "auto", **vllm_options) -> Policy:
    """A Hugging Face checkpoint folder sampled in this process by `engine`: transformers (CPU or GPU, on
    `device`), vllm (`vllm_options` are VLLMPolicy's), or auto (vLLM on a GPU when installed)."""
    if engine not in ENGINES:
        raise PolicyError(f"engine {engine!r} is not one of {', '.join(ENGINES)}")
    if engine == "vllm" or (engine == "auto" and _vllm_usable()):
        from .vllm import VLLMPolicy

        return VLLMPolicy(str(path), **vllm_options)
    from .hf import HFPolicy

    return HFPolicy(str(path), device=device)


def _vllm_usable() -> bool:
    try:
        import torch
        import vllm  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available()

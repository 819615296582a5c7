"""The task concept: one problem, how it is posed and how it is scored."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sandboxes.spec import SandboxSpec


@dataclass
class Task:
    """One problem. `prompt` is a list of chat messages ({role, content})."""

    id: str
    data_source: str
    prompt: list[dict[str, str]]
    env_class: str  # "swe", "gsm8k", "gsm8k_tool", ...
    reward_spec: dict[str, Any]  # {"method": ..., "ground_truth": ...}
    sandbox: SandboxSpec | None = None  # None for pure-text tasks
    tools: list[str] = field(default_factory=list)
    max_turns: int = 1
    metadata: dict[str, Any] = field(default_factory=dict)  # SkyRL's extra_info


@dataclass
class Reward:
    """A verifier's verdict: the scalar used for training plus the reasons behind it."""

    value: float
    details: dict[str, Any] = field(default_factory=dict)

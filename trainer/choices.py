"""The allowed values of the trainer's choice keys, spelled once.

The config schema (`trainer/config_schema.py`) validates against them, `trainer/algorithms.py` and the
learner check their arguments against them, and the SkyRL key mapping (`trainer/skyrl_compat.py`)
translates SkyRL's spellings into them. Imports nothing heavy (no torch, no Ray).
"""

from __future__ import annotations

from typing import Literal, get_args

from tasks.gsm8k import Mode as RewardMode  # noqa: F401  (spelled once, where the GSM8K reward reads it)
from tasks.grading.patch_policy import GradingMode  # noqa: F401  (spelled once, where the patch review reads it)

#: Built-in group-relative advantage estimators (plugins register more by name).
AdvantageMethod = Literal["grpo", "dr_grpo", "rloo"]
Aggregation = Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"]
KLType = Literal["k1", "k3"]
Scheduler = Literal["constant", "cosine", "linear"]
Strategy = Literal["single", "fsdp2"]
Precision = Literal["fp32", "bf16"]
SandboxBackend = Literal["auto", "docker", "local", "overlay", "podman"]
InferenceEngine = Literal["transformers", "vllm"]
WeightSync = Literal["load", "disk", "nccl"]
LoggerType = Literal["jsonl", "tensorboard", "wandb"]


def values(choice) -> tuple[str, ...]:
    """The allowed values of one of the Literals above, as a tuple."""
    return get_args(choice)

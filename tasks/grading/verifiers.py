"""Reward functions: the end state of an episode (a final answer or a patch) becomes a Reward.

`reward_spec.method` selects one from `REWARDS` (a registered name or a user's `module:function`).
A reward function is `fn(task, outcome, backend) -> Reward | float`: `outcome` is what the
task kind extracts at the end of an episode (the final answer, or the model patch).
"""

from __future__ import annotations

from typing import Any, Callable

from sandboxes import Backend

from ..errors import TaskError
from .grade import grade
from ..gsm8k import gsm8k_reward
from infra.plugins import Registry
from ..swe import grading_problems
from ..task import Reward, Task

RewardFunction = Callable[[Task, str, "Backend | None"], "Reward | float"]
REWARDS: Registry[RewardFunction] = Registry("reward function", "harness.rewards")
register_reward = REWARDS.register


@register_reward("swebench")
def swebench_reward(task: Task, outcome: str, backend: Backend | None) -> Reward:
    """Grade the patch like SWE-bench does, in a fresh sandbox (`reward_spec.grading_mode`: default or refuse)."""
    if backend is None:
        raise TaskError("grading a repo-fix task needs a sandbox backend")
    problems = grading_problems(task.metadata["instance"])
    if problems:
        raise TaskError(
            f"{task.id} cannot be graded: " + "; ".join(f"{field}: {message}" for field, message in problems)
        )
    report = grade(
        task.metadata["instance"],
        outcome,
        backend,
        fractional=bool(task.reward_spec.get("fractional")),
        grading_mode=task.reward_spec.get("grading_mode", "default"),
    )
    if report.error:  # the grader's sandbox failed: no verdict on the patch
        raise TaskError(f"grading {task.id} failed: {report.error}")
    return Reward(report.reward, report.to_dict())


@register_reward("rule")
def rule_reward(task: Task, outcome: str, backend: Backend | None) -> Reward:
    """SkyRL's GSM8K rule: the number after `####` against the ground truth."""
    spec = task.reward_spec
    return gsm8k_reward(
        outcome,
        str(spec["ground_truth"]),
        mode=spec.get("mode", "strict"),
        format_score=float(spec.get("format_score", 0.0)),
    )


def verify(task: Task, outcome: str, backend: Backend | None = None, default_method: str | None = None) -> Reward:
    """Score `outcome` with the reward function `task.reward_spec['method']` selects (else `default_method`)."""
    method = task.reward_spec.get("method") or default_method
    if not method:
        raise TaskError(
            f"task {task.id}: reward_spec names no method and its kind {task.env_class!r} has no default reward"
        )
    value: Any = REWARDS.get(method)(task, outcome, backend)
    if isinstance(value, Reward):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Reward(float(value))
    if isinstance(value, bool):
        return Reward(float(value))
    raise TaskError(f"reward function {method!r} returned {type(value).__name__}; return a Reward or a number")

"""Verifiers: the end state of an episode (a final answer or a patch) becomes a Reward."""

from __future__ import annotations

from sandboxes import Backend

from .errors import TaskError
from .grading import grade
from .gsm8k import gsm8k_reward
from .swe import grading_problems
from .task import Reward, Task


def verify(task: Task, outcome: str, backend: Backend | None = None) -> Reward:
    """`outcome` is the model patch for repo-fix tasks and the final answer text otherwise."""
    method = task.reward_spec.get("method")
    if task.env_class == "swe":
        if backend is None:
            raise TaskError("grading a repo-fix task needs a sandbox backend")
        problems = grading_problems(task.metadata["instance"])
        if problems:
            raise TaskError(f"{task.id} cannot be graded: " + "; ".join(f"{field}: {message}" for field, message in problems))
        report = grade(task.metadata["instance"], outcome, backend, fractional=bool(task.reward_spec.get("fractional")))
        return Reward(report.reward, report.to_dict())
    if task.env_class in ("gsm8k", "gsm8k_tool") or method == "rule":
        spec = task.reward_spec
        return gsm8k_reward(outcome, str(spec["ground_truth"]), mode=spec.get("mode", "strict"), format_score=float(spec.get("format_score", 0.0)))
    raise TaskError(f"no verifier for env_class {task.env_class!r} (reward method {method!r})")

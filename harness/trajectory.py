"""What an episode leaves behind: messages, exact tokens, reward, how and why it ended."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from infra.rundir import safe_name

EXIT_STATUSES = (
    "submitted",  # the agent submitted (or gave its final answer)
    "max_turns",  # the turn limit ran out
    "context_exceeded",  # the next turn would not fit the context budget
    "wall_time",  # the episode's wall-clock limit passed
    "format_errors",  # too many turns in a row without a usable tool call
    "policy_error",  # the model or endpoint failed
    "sandbox_error",  # the sandbox died or could not be created
    # a scaffold program (harness.scaffolds) ended the episode without submitting:
    "scaffold_error",  # it exited with a status other than 0 (crashed)
    "no_submit",  # it exited with status 0
    "output_limit",  # it wrote more output than its limit and was stopped
    "error",  # (a results row only) the episode could not run at all: a malformed task record, a harness bug
)

SCORING_FAILED = "scoring failed"  # how `Trajectory.error` begins its part about a verifier that could not score


def infrastructure_failure(trajectory: "Trajectory") -> str:
    """How the episode ended through no action of the policy ("" when it did not): `sandbox_error` (its sandbox
    died or could not be created or answer) or `scoring_error` (the verifier, or the grader's own sandbox, failed).
    Its reward of 0 says nothing about the policy: training leaves such episodes out. Running out of turns, context
    or wall time, and a tool call that timed out, are the policy's own doing."""
    if trajectory.exit_status == "sandbox_error":
        return "sandbox_error"
    if SCORING_FAILED in trajectory.error:
        return "scoring_error"
    return ""


@dataclass
class Trajectory:
    task_id: str
    sample: int = 0
    policy: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)  # the OpenAI tool schemas the policy was offered
    exit_status: str = ""
    error: str = ""
    reward: float = 0.0
    reward_details: dict[str, Any] = field(default_factory=dict)
    turns: int = 0
    model_patch: str = ""
    # in-process models only: the exact token record (see harness.tokens)
    token_ids: list[int] | None = None
    loss_mask: list[int] | None = None
    logprobs: list[float] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    untrained_turns: list[int] = field(default_factory=list)  # assistant turns (1 = first) kept out of the loss
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Trajectory":
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_dict()))
        tmp.replace(path)


def grading_reason(details: dict[str, Any]) -> str:
    """Why a graded outcome scored what it did, in one line ("" where nothing needs saying)."""
    if (
        details.get("patch_exists")
        and details.get("patch_successfully_applied") is False
        and not details.get("rejected")
    ):
        return "the patch does not apply"
    return "; ".join(details.get("rejected") or []) or details.get("invalid_log") or details.get("error") or ""


def result_row(t: Trajectory) -> dict[str, Any]:
    """One results.jsonl row; `verdict` is the grader's (`tasks.grading.grade.VERDICTS`) where it gave one."""
    details = t.reward_details
    return {
        "task_id": t.task_id,
        "sample": t.sample,
        "reward": t.reward,
        "resolved": t.reward >= 1.0,
        "exit_status": t.exit_status,
        "error": t.error,
        "turns": t.turns,
        "prompt_tokens": t.prompt_tokens,
        "completion_tokens": t.completion_tokens,
        "wall_s": t.timings.get("total_s", 0.0),
        "model_patch": t.model_patch,
        "policy": t.policy,
        "neutralized": list(details.get("neutralized") or []),
        "verdict": details.get("verdict") or ("resolved" if t.reward >= 1.0 else "unresolved"),
        "reason": grading_reason(details) or (details.get("reason", "") if t.reward < 1.0 else ""),
        # a multi-step task's steps in the order they ran: each one's reward, and why the trial stopped there
        **({"steps": [step_summary(step) for step in details["steps"]]} if details.get("steps") else {}),
    }


def step_summary(step: dict[str, Any]) -> dict[str, Any]:
    """One step of a multi-step task as results and reports show it (`harness.kinds.harbor`)."""
    return {
        "step": step["step"],
        "reward": step.get("reward"),
        **({"stopped": step["stopped"]} if "stopped" in step else {}),
    }


def trajectory_file(run_dir: Path, task_id: str, sample: int) -> Path:
    """Where an eval run keeps the trajectory of one (task, sample): `<id>__<sample>.json`, the id made
    safe as a file name (`infra.rundir.safe_name`)."""
    return run_dir / "trajectories" / f"{safe_name(task_id)}__{sample}.json"


def scaffold_folder(run_dir: Path, task_id: str, sample: int) -> Path:
    """Where a scaffold's own records of one (task, sample) go: `scaffolds/<id>__<sample>/`."""
    return run_dir / "scaffolds" / trajectory_file(run_dir, task_id, sample).stem

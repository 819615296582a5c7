"""`repo`: a free-form request on a copy of the user's own repository (`harness run`, `Agent.run_task`).

The outcome is the patch; the verdict is the user's test command run in a fresh sandbox, if any."""

from __future__ import annotations

from typing import Any

from tasks.task import Reward, Task
from tasks.user_repo import ENV_CLASS, load_repo, verify_repo
from tasks.worktree import diff_against, start_state

from ..environments import ToolEnvironment
from ..policy import Completion
from . import register_kind


class RepoEnvironment(ToolEnvironment):
    """A copy of the user's repository (tasks.user_repo); the patch is judged by the test command, if any."""

    def init(self) -> list[dict[str, Any]]:
        messages = super().init()
        self.start = self.task.metadata["base_commit"]  # until the copy is in
        load_repo(self.sandbox, self.task)
        self.start = start_state(self.sandbox, self.task.metadata["workdir"], self.task.metadata["base_commit"])
        return messages

    def finish(self) -> Reward:
        if self.sandbox is None:
            return Reward(0.0, {"reason": "the sandbox never started"})
        self.outcome = diff_against(self.sandbox, self.task.metadata["workdir"], self.start)
        return verify_repo(self.task, self.outcome, self.backend)


def no_gold(task: Task, use_tools: bool) -> list[Completion]:
    raise ValueError(
        "a request on your own repository has no reference solution to play; "
        "use empty, replay:PATH, a checkpoint folder or endpoint:MODEL"
    )


def test_sandbox(task: Task) -> list:
    """The user's test command runs in a fresh copy of the repository."""
    return [task.sandbox] if task.metadata.get("test_command") else []


register_kind(ENV_CLASS, RepoEnvironment, outcome="patch", gold=no_gold, verifier_sandboxes=test_sandbox)

"""`swe`: fix a repository (SWE-bench instances); the outcome is the patch, graded like SWE-bench."""

from __future__ import annotations

from tasks.grading.grade import run_setup
from tasks.task import Reward, Task
from tasks.worktree import diff_against, start_state

from ..environments import ToolEnvironment
from ..policy import Completion, tool_turn as call
from . import register_kind


class SWEEnvironment(ToolEnvironment):
    """A repository at its base commit; the model patch is the diff of the work tree against the
    state the episode started from, after the environment's setup (`tasks.worktree`): what the
    image's install step or a setup script changed is never the agent's.

    An instance with a `setup_script` (e.g. swe-tiny's, which writes its repository into a
    shared image) or a `repo_archive` (`tasks.shared_env`: its repository put into its
    repository's environment image) gets it in the sandbox before the first turn, as the grader does.
    """

    def init(self) -> list[dict]:
        messages = super().init()
        instance = self.task.metadata["instance"]
        self.start = instance["base_commit"]  # until the setup has run
        if self.sandbox is not None:
            run_setup(self.sandbox, instance)
            self.start = start_state(self.sandbox, instance.get("workdir", "/testbed"), instance["base_commit"])
        return messages

    def finish(self) -> Reward:
        if self.sandbox is None:
            return Reward(0.0, {"reason": "the sandbox never started"})
        self.outcome = self.current_patch()
        self.sandbox.close()  # grading runs in a fresh sandbox: free this one first
        return super().finish()

    def current_patch(self) -> str:
        instance = self.task.metadata["instance"]
        return diff_against(self.sandbox, instance.get("workdir", "/testbed"), self.start)


def gold_turns(task: Task, use_tools: bool) -> list[Completion]:
    """Write the reference patch, apply it, submit; or, where the instance lists `gold_edits`
    ({path, old_str, new_str}), make those edits with the editor and submit."""
    if not use_tools:
        raise ValueError("a repository task cannot be solved without tools")
    edits = task.metadata["instance"].get("gold_edits")
    if edits:
        return [call("str_replace_editor", command="str_replace", **edit) for edit in edits] + [call("submit")]
    patch = task.metadata["instance"]["patch"]
    workdir = task.metadata["instance"].get("workdir", "/testbed")
    return [
        call("str_replace_editor", command="create", path="/tmp/gold.patch", file_text=patch),
        call("bash", command=f"cd {workdir} && git apply /tmp/gold.patch && rm /tmp/gold.patch && git status --short"),
        call("submit"),
    ]


register_kind("swe", SWEEnvironment, outcome="patch", gold=gold_turns, reward="swebench")

"""Gym-style environments: the task's side of an episode (skyrl-gym's BaseTextEnv in spirit).

`init()` gives the first messages, `step(turn)` runs the turn's tool calls and says whether
the episode is done, `finish()` scores the end state with the task's verifier, `close()`
releases the sandbox.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable

from sandboxes import Backend, Sandbox
from tasks.task import Reward, Task
from tasks.user_repo import NOT_IN_PATCH, diff_against, load_repo, verify_repo
from tasks.verifiers import verify

from .errors import HarnessError, ToolError
from .parsing import ParsedTurn
from .tools import Toolbox

NO_TOOL_CALL = (
    "No tool call was found in your reply. Call exactly one of the tools ({tools}) using "
    '<tool_call>{{"name": ..., "arguments": {{...}}}}</tool_call>, or call `submit` when you are done.'
)


@dataclass
class StepResult:
    observations: list[dict[str, Any]]
    done: bool = False
    format_error: bool = False  # the turn had no usable tool call
    info: dict[str, Any] = field(default_factory=dict)


class Environment(ABC):
    tools: list[str] = []

    def __init__(self, task: Task, backend: Backend | None = None, sandbox: Sandbox | None = None, command_timeout: float = 120.0):
        self.task = task
        self.backend = backend
        self.command_timeout = command_timeout
        self.sandbox = sandbox  # a ready sandbox (forked or from a pool); else created in init
        self.answer = ""  # the final answer (text tasks) or the model patch (repo tasks)

    def init(self) -> list[dict[str, Any]]:
        return [dict(m) for m in self.task.prompt]

    @abstractmethod
    def step(self, turn: ParsedTurn) -> StepResult: ...

    def finish(self) -> Reward:
        return verify(self.task, self.answer, self.backend)

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()


class ToolEnvironment(Environment):
    """Runs tool calls in a sandbox; `submit` ends the episode."""

    def init(self) -> list[dict[str, Any]]:
        self.tools = list(self.task.tools)
        if self.sandbox is None and self.task.sandbox is not None:
            self.sandbox = self.backend.create(self.task.sandbox)
        self.toolbox = Toolbox(self.sandbox, command_timeout=self.command_timeout)
        return super().init()

    def step(self, turn: ParsedTurn) -> StepResult:
        if not turn.tool_calls:
            if not turn.errors and self.accepts_final_text(turn):
                return StepResult([], done=True)
            feedback = [f"Error: {e}" for e in turn.errors] or [NO_TOOL_CALL.format(tools=", ".join(self.tools))]
            return StepResult([{"role": "user", "content": "\n".join(feedback)}], format_error=True)
        observations, done, failures = [], False, 0
        for call in turn.tool_calls:
            content, ok = self._run_call(call, done)
            done = done or (call.name == "submit" and ok)
            failures += not ok
            observations.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content})
        if turn.errors:  # malformed blocks beside valid ones: said after the tool results
            observations.append({"role": "user", "content": "\n".join(f"Error: {e}" for e in turn.errors)})
        return StepResult(observations, done=done, format_error=failures == len(turn.tool_calls))

    def _run_call(self, call, already_done: bool) -> tuple[str, bool]:
        if already_done:
            return "Ignored: the episode was already submitted.", True
        if call.name == "submit":
            return ("Submitted.", True) if self.on_submit(call.arguments) else ("Error: invalid submit arguments.", False)
        if call.name not in self.tools:
            return f"Error: unknown tool `{call.name}`; available tools: {', '.join(self.tools)}", False
        try:
            return self.toolbox.run(call.name, call.arguments), True
        except ToolError as err:
            return f"Error: {err}", False

    def accepts_final_text(self, turn: ParsedTurn) -> bool:
        return False

    def on_submit(self, raw_arguments: str) -> bool:
        return True


class SWEEnvironment(ToolEnvironment):
    """A repository at its base commit; the model patch is the diff of the work tree."""

    def finish(self) -> Reward:
        if self.sandbox is None:
            return Reward(0.0, {"reason": "the sandbox never started"})
        self.answer = self.current_patch()
        return super().finish()

    def current_patch(self) -> str:
        instance = self.task.metadata["instance"]
        return diff_against(self.sandbox, instance.get("workdir", "/testbed"), instance["base_commit"])


class RepoEnvironment(ToolEnvironment):
    """A copy of the user's own repository (tasks.user_repo); the patch is judged by the test command, if any."""

    def init(self) -> list[dict[str, Any]]:
        messages = super().init()
        load_repo(self.sandbox, self.task)
        return messages

    def finish(self) -> Reward:
        if self.sandbox is None:
            return Reward(0.0, {"reason": "the sandbox never started"})
        self.answer = diff_against(self.sandbox, self.task.metadata["workdir"], self.task.metadata["base_commit"], NOT_IN_PATCH)
        return verify_repo(self.task, self.answer, self.backend)


class GSM8KEnvironment(Environment):
    """Single turn: the reply is the answer."""

    def step(self, turn: ParsedTurn) -> StepResult:
        self.answer = turn.content
        return StepResult([], done=True)


class GSM8KToolEnvironment(ToolEnvironment):
    """The model may run Python in a sandbox, then answers (in text or through `submit`)."""

    def accepts_final_text(self, turn: ParsedTurn) -> bool:
        self.answer = turn.content
        return True

    def on_submit(self, raw_arguments: str) -> bool:
        try:
            answer = json.loads(raw_arguments or "{}").get("answer", "")
        except (json.JSONDecodeError, AttributeError):
            return False
        self.answer = f"#### {answer}" if "####" not in str(answer) else str(answer)
        return True


ENVIRONMENTS: dict[str, Callable[..., Environment]] = {
    "swe": SWEEnvironment,
    "repo": RepoEnvironment,
    "gsm8k": GSM8KEnvironment,
    "gsm8k_tool": GSM8KToolEnvironment,
}


def make_environment(task: Task, backend: Backend | None = None, sandbox: Sandbox | None = None, command_timeout: float = 120.0) -> Environment:
    if task.env_class not in ENVIRONMENTS:
        raise HarnessError(f"no environment for env_class {task.env_class!r}; known: {sorted(ENVIRONMENTS)}")
    return ENVIRONMENTS[task.env_class](task, backend, sandbox, command_timeout)

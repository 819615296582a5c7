"""Gym-style environments: the task's side of an episode (skyrl-gym's BaseTextEnv in spirit).

`init()` gives the first messages, `step(turn)` runs the turn's tool calls and says whether
the agent's session is done, `next_session()` may start another on a next instruction, `finish()` scores the end state with the task's reward function,
`close()` releases the sandbox. The built-in kinds are in `harness.kinds`; subclass
`Environment` (text) or `ToolEnvironment` (tools in a sandbox) for your own.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from sandboxes import Backend, Sandbox
from tasks.task import Reward, Task
from tasks.grading.verifiers import verify

from .errors import ToolError
from .parsing import ParsedTurn, ToolCall
from .tools import Toolbox, parse_arguments


def no_tool_call(tools: list[str], syntax: str) -> str:
    """The feedback on a reply without a tool call, showing the call syntax of the model's own format."""
    using = f" using {syntax}" if syntax else ""
    return f"No tool call was found in your reply. Call exactly one of the tools ({', '.join(tools)}){using}, or call `submit` when you are done."


@dataclass
class StepResult:
    observations: list[dict[str, Any]]
    done: bool = False
    format_error: bool = False  # the turn had no usable tool call
    info: dict[str, Any] = field(default_factory=dict)


class Environment(ABC):
    tools: list[str] = []
    default_reward: str | None = None  # the reward function when the task's reward_spec names none
    deadline: float | None = None  # time.monotonic() when the episode's wall time runs out (None: no bound)

    def __init__(
        self, task: Task, backend: Backend | None = None, sandbox: Sandbox | None = None, command_timeout: float = 120.0
    ):
        self.task = task
        self.backend = backend
        self.command_timeout = command_timeout
        self.sandbox = sandbox  # a ready sandbox (forked or from a pool); else created in init
        self.outcome = ""  # the outcome the reward function scores: the final answer, or the model patch

    def init(self) -> list[dict[str, Any]]:
        return [dict(m) for m in self.task.prompt]

    def time_left(self) -> float | None:
        """Seconds left of the episode's wall time (None: no bound)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    @abstractmethod
    def step(self, turn: ParsedTurn) -> StepResult: ...

    def next_session(self) -> list[dict[str, Any]] | None:
        """Called when an agent session ends: the first messages of a fresh session on the task's next
        instruction (a multi-step task), or None when the agent's work is over and `finish` scores it."""
        return None

    def finish(self) -> Reward:
        return verify(self.task, self.outcome, self.backend, self.default_reward)

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()


class ToolEnvironment(Environment):
    """Runs tool calls in a sandbox; `submit` ends the episode."""

    def init(self) -> list[dict[str, Any]]:
        self.tools = list(self.task.tools)
        if self.sandbox is None and self.task.sandbox is not None:
            # a start that hangs ends within the episode's time
            self.sandbox = self.backend.create_within(self.task.sandbox, self.time_left())
        self.toolbox = Toolbox(self.sandbox, command_timeout=self.command_timeout)
        return super().init()

    def step(self, turn: ParsedTurn) -> StepResult:
        if not turn.tool_calls:
            if not turn.errors and self.accepts_final_text(turn):
                return StepResult([], done=True)
            feedback = [f"Error: {e}" for e in turn.errors] or [no_tool_call(self.tools, turn.syntax)]
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
            try:
                arguments = parse_arguments(call.arguments)
            except ToolError:
                arguments = None
            return ("Submitted.", True) if self.on_submit(arguments) else ("Error: invalid submit arguments.", False)
        if call.name not in self.tools:
            return f"Error: unknown tool `{call.name}`; available tools: {', '.join(self.tools)}", False
        self.toolbox.command_timeout = self.call_timeout(call)
        try:
            return self.toolbox.run(call.name, call.arguments), True
        except ToolError as err:
            return f"Error: {err}", False

    def call_timeout(self, call: ToolCall) -> float:
        """Seconds the call may run: the per-command limit, or a scripted call's own (an oracle's solution script)
        up to the episode's time left (at least a second: the episode's end is checked between turns)."""
        if call.timeout is None:
            return self.command_timeout
        left = self.time_left()
        return call.timeout if left is None else max(min(call.timeout, left), 1.0)

    def accepts_final_text(self, turn: ParsedTurn) -> bool:
        return False

    def on_submit(self, arguments: dict | None) -> bool:
        """`submit` was called with these arguments (None: not a JSON object). False rejects the call."""
        return True

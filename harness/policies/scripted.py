"""Scripted policies: `gold` (the reference solution, through the tools), `gold-no-tools`, `empty`, `replay`.

They exercise the whole loop (tools, sandbox, verifier) without a model, so they give the
ceiling and floor of a task set and measure the harness's own overhead.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import PolicyError
from ..parsing import ToolCall
from ..policy import Completion, Policy, Sampling, tool_turn
from ..trajectory import Trajectory


class ScriptedPolicy(Policy):
    """Plays a fixed list of turns, one per call."""

    scripted = True

    def __init__(self, name: str, turns: list[Completion], then: Completion | None = None):
        self.name = name
        self.turns = turns
        self.then = then or Completion(text="", finish_reason="stop")  # what it plays once its turns are over
        self.position = 0

    def generate(self, messages, tools, sampling: Sampling) -> Completion:
        if self.position >= len(self.turns):
            return self.then
        turn = self.turns[self.position]
        self.position += 1
        return turn


class GoldPolicy(Policy):
    """The reference solution: the turns the task's kind scripts (`gold`). With use_tools=False
    (`gold-no-tools`) a question's reference answer is submitted at once: demonstrations of an agent that
    does not use its tools (RL can teach it to)."""

    def __init__(self, use_tools: bool = True):
        self.use_tools = use_tools
        self.name = "gold" if use_tools else "gold-no-tools"

    def for_task(self, task) -> Policy:
        from ..kinds import kind_of

        kind = kind_of(task)
        if kind.gold is None:
            raise PolicyError(f"{self.name}: the task kind {kind.name!r} scripts no gold solution")
        try:
            turns = kind.gold(task, self.use_tools)
        except ValueError as err:
            raise PolicyError(f"{self.name}: task {task.id}: {err}") from None
        return ScriptedPolicy(self.name, turns)

    def generate(self, messages, tools, sampling):
        raise PolicyError("the gold policy plays per task: use for_task()")


class EmptyPolicy(Policy):
    name = "empty"

    def for_task(self, task) -> Policy:
        turn = tool_turn("submit") if task.tools else Completion(text="")
        return ScriptedPolicy("empty", [turn], then=turn)  # the same in every session of a multi-step task

    def generate(self, messages, tools, sampling):
        raise PolicyError("the empty policy plays per task: use for_task()")


class ReplayPolicy(Policy):
    """Re-runs the assistant turns of saved trajectories (a .json file or a folder of them)."""

    def __init__(self, source: str | Path):
        source = Path(source)
        files = sorted(source.rglob("*.json")) if source.is_dir() else [source]
        if not files:
            raise PolicyError(f"no trajectories to replay in {source}")
        self.name = f"replay:{source}"
        self.by_task: dict[str, Trajectory] = {}
        for path in files:
            try:
                trajectory = Trajectory.from_dict(json.loads(path.read_text()))
            except (json.JSONDecodeError, TypeError) as err:
                raise PolicyError(f"{path} is not a trajectory: {err}") from None
            self.by_task.setdefault(trajectory.task_id, trajectory)

    def for_task(self, task) -> Policy:
        if task.id in self.by_task:
            saved = self.by_task[task.id]
        elif len(self.by_task) == 1:  # one saved trajectory replays on whatever task it is given
            (saved,) = self.by_task.values()
        else:
            raise PolicyError(f"no saved trajectory for task {task.id}")
        turns = []
        for message in saved.messages:
            if message["role"] == "assistant":
                calls = [
                    ToolCall(c["id"], c["function"]["name"], c["function"]["arguments"])
                    for c in message.get("tool_calls", [])
                ]
                turns.append(Completion(text=message.get("content") or "", tool_calls=calls or None))
        return ScriptedPolicy(self.name, turns)

    def generate(self, messages, tools, sampling):
        raise PolicyError("the replay policy plays per task: use for_task()")

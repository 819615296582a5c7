"""`gsm8k` (one text turn) and `gsm8k_tool` (Python in a sandbox, then `submit`): math word problems."""

from __future__ import annotations

from tasks.gsm8k import final_calculation
from tasks.task import Task

from ..environments import Environment, StepResult, ToolEnvironment
from ..parsing import ParsedTurn
from ..policy import Completion, tool_turn as call
from . import register_kind


class GSM8KEnvironment(Environment):
    """Single turn: the reply is the answer."""

    def step(self, turn: ParsedTurn) -> StepResult:
        self.outcome = turn.content
        return StepResult([], done=True)


class GSM8KToolEnvironment(ToolEnvironment):
    """The model may run Python in a sandbox, then answers (in text or through `submit`)."""

    def accepts_final_text(self, turn: ParsedTurn) -> bool:
        self.outcome = turn.content
        return True

    def on_submit(self, arguments: dict | None) -> bool:
        if arguments is None:
            return False
        answer = str(arguments.get("answer", ""))
        self.outcome = answer if "####" in answer else f"#### {answer}"
        return True


def gold_text(task: Task, use_tools: bool) -> list[Completion]:
    """The reference solution (working, then `#### answer`) where the task has one, else the answer line alone."""
    reference = task.metadata.get("answer")
    return [Completion(text=reference or f"The answer is below.\n#### {task.reward_spec['ground_truth']}")]


def gold_tool(task: Task, use_tools: bool) -> list[Completion]:
    """The reference's last calculation through the `python` tool, then its printed result."""
    expression = final_calculation(task.metadata.get("answer", ""))
    compute = [call("python", code=f"print({expression})")] if expression and use_tools else []
    return [*compute, call("submit", answer=str(task.reward_spec["ground_truth"]))]


register_kind("gsm8k", GSM8KEnvironment, gold=gold_text, reward="rule")
register_kind("gsm8k_tool", GSM8KToolEnvironment, gold=gold_tool, reward="rule")

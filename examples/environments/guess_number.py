"""Your own environment in about 30 lines: guess a secret number, told "higher" or "lower" each turn."""

import re

from harness.api import Completion, Environment, Reward, StepResult, register_kind, register_reward


class GuessNumber(Environment):
    """Each reply is a guess; a wrong one gets a hint and another turn (up to the task's max_turns)."""

    def step(self, turn):
        found = re.search(r"-?\d+", turn.content)
        if found is None:
            return StepResult([{"role": "user", "content": "Reply with a number."}], format_error=True)
        self.outcome = found.group()
        secret = int(self.task.reward_spec["ground_truth"])
        if int(self.outcome) == secret:
            return StepResult([], done=True)
        hint = "higher" if int(self.outcome) < secret else "lower"
        return StepResult([{"role": "user", "content": f"No, the number is {hint}. Guess again."}])


@register_reward("guessed")
def guessed(task, outcome, backend):
    return Reward(float(outcome == str(task.reward_spec["ground_truth"])))


def gold(task, use_tools):
    return [Completion(text=str(task.reward_spec["ground_truth"]))]


register_kind("guess_number", GuessNumber, gold=gold, reward="guessed")

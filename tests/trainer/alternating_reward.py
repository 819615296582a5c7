"""A reward for testing the trainer's path, not for learning: calls pay 1 and 0 in turn, so every group of two has
reward variance and its update is not zero. The turn is kept in the file `reward_spec["counter"]` names (locked:
the processes that score share it)."""

from __future__ import annotations

import fcntl

from tasks.task import Reward, Task


def alternating(task: Task, outcome: str, backend) -> Reward:
    with open(task.reward_spec["counter"], "a+") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        calls = len(counter.read())
        counter.write("x")
    return Reward(float(calls % 2), {"call": calls})

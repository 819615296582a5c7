"""Gold demonstrations that sometimes recover from a wrongly copied line, for repo-fix tasks whose
instances list `gold_edits` (swe-tiny).

On one task in RECOVERY_EVERY (chosen by a hash of its id) whose first edit's old line holds a
number, the first editor call copies that number wrong: the editor answers that `old_str` does not
appear in the file, and the next call makes the right edit, then submits. Every other task gets the
plain gold turns. A model that learned only from flawless demonstrations has never seen a failed
edit, and after one it tends to emit broken calls until its turns run out; these show it going on.

`RecoversFromAMiscopy` keeps the wrong call out of the training loss (`Completion.trained`): the
model sees it in the context of the turns after it, and learns only the recovery.
`LearnsTheMiscopyToo` trains on it as well. On swe-tiny-unique neither raised the held-out rate
(docs/results/learning.md): the model learned to retry after a refusal, and its retries miscopy too.

    PYTHONPATH=examples/swe harness generate --checkpoint miscopy_recovery:RecoversFromAMiscopy --tasks swe-tiny-unique-sft
"""

from __future__ import annotations

import dataclasses
import re
import zlib

from harness.errors import PolicyError
from harness.kinds.swe import gold_turns
from harness.policies.scripted import ScriptedPolicy
from harness.policy import Policy, tool_turn

RECOVERY_EVERY = 3
NUMBER = re.compile(r"\d+")


def miscopied(line: str) -> str | None:
    """`line` with its first number's last digit changed (7 -> 8, 9 -> 0), or None without a number."""
    number = NUMBER.search(line)
    if number is None:
        return None
    end = number.end() - 1
    return line[:end] + str((int(line[end]) + 1) % 10) + line[end + 1 :]


class RecoversFromAMiscopy(Policy):
    name = "miscopy-recovery"
    train_on_the_miscopy = False

    def for_task(self, task) -> Policy:
        try:
            turns = gold_turns(task, use_tools=True)
        except (KeyError, ValueError) as err:
            raise PolicyError(f"{self.name}: task {task.id} has no gold solution: {err}") from None
        edits = task.metadata["instance"].get("gold_edits") or []
        if edits and zlib.crc32(task.id.encode()) % RECOVERY_EVERY == 0:
            wrong = miscopied(edits[0]["old_str"])
            if wrong is not None:
                mistake = tool_turn("str_replace_editor", command="str_replace", **{**edits[0], "old_str": wrong})
                turns = [dataclasses.replace(mistake, trained=self.train_on_the_miscopy)] + turns
        return ScriptedPolicy(self.name, turns)

    def generate(self, messages, tools, sampling):
        raise PolicyError("this scripted policy plays per task: use for_task()")


class LearnsTheMiscopyToo(RecoversFromAMiscopy):
    name = "miscopy-recovery-unmasked"
    train_on_the_miscopy = True

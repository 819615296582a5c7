"""The generated arithmetic sets: held-out and training share no problem, and every answer is right."""

from __future__ import annotations

import operator
import re

import pytest

from tasks.gsm8k import gsm8k_reward
from tasks.taskset import load_tasks

OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul}


@pytest.mark.parametrize(
    "held_out, train, val, largest",
    [("arith", "arith-train", "arith-val", 9), ("arith2", "arith2-train", "arith2-val", 99)],
)
def test_the_splits_are_disjoint_and_every_answer_is_right(held_out, train, val, largest):
    tests, trains = load_tasks(held_out), load_tasks(train)
    vals = load_tasks(val)
    assert (len(tests), len(trains), len(vals)) == (200, 2000, 200)
    trains += vals
    questions = [task.metadata["question"] for task in tests + trains]
    assert len(set(questions)) == len(questions)  # no problem twice, within or across the splits
    assert all(task.id.startswith(f"{held_out}-") for task in tests + trains)
    operands = []
    for task in tests + trains:
        a, b = map(int, re.findall(r"\d+", task.metadata["question"]))
        operands += [a, b]
        working, answer = task.metadata["answer"].split("\n#### ")
        left, op, right, _, value = working.split()
        assert OPS[op](int(left), int(right)) == int(value) == int(answer) == int(task.reward_spec["ground_truth"])
        assert gsm8k_reward(task.metadata["answer"], task.reward_spec["ground_truth"]).value == 1.0
    assert max(operands) == largest and min(operands) >= 0


def test_the_answer_summary_counts_the_line_the_reward_and_the_cut(tmp_path):
    import json
    import subprocess
    import sys

    from tests.cli_helpers import ROOT

    def answer(question, text, reward, finish="stop"):
        return {
            "messages": [{"role": "user", "content": question}, {"role": "assistant", "content": text}],
            "reward": reward,
            "reward_details": {"ground_truth": "8"},
            "metadata": {"turn_stats": [{"finish_reason": finish}]},
        }

    plus = "Ada has 3 pens. Ada gets 5 more. How many pens does Ada have now?"
    times = "Ben buys 2 bags with 4 pens in each bag. How many pens does Ben buy?"
    rows = [
        answer(plus, "3 + 5 = 8\n#### 8", 1.0),
        answer(plus, "#### 9", 0.0),
        answer(times, "2 * 4 = 8", 0.0),
        answer(times, "First we", 0.0, "length"),
    ]
    (tmp_path / "rollouts").mkdir()
    (tmp_path / "rollouts" / "step_000003.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = subprocess.run(
        [sys.executable, "scripts/arith_answers.py", str(tmp_path)], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "step 3: 4 answers: line 0.50  strict 0.25  flexible 0.50  cut 0.25  right of those with the line: + 1/2"
    )

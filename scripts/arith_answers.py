"""What a GRPO run on arith-format problems learned, step by step, from its sampled answers.

    python3 scripts/arith_answers.py RUN_DIR

For each `RUN_DIR/rollouts/step_*.jsonl`: the share of answers with a `#### N` line, right under the strict rule
(the reward), right under the flexible rule (the last number), cut off at the token limit, and, of the answers with
the line, how many are right, by operation (+, -, *).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tasks.arith import question_operation
from tasks.gsm8k import extract_answer


def step_summary(trajectories: list[dict]) -> str:
    count = len(trajectories)
    line = strict = flexible = cut = 0
    by_operation: dict[str, list[int]] = {}
    for t in trajectories:
        answer, truth = t["messages"][-1]["content"], t["reward_details"]["ground_truth"]
        has_line = extract_answer(answer, "strict") is not None
        last = extract_answer(answer, "flexible")
        line += has_line
        strict += t["reward"] == 1.0
        flexible += last is not None and float(last) == float(truth)
        cut += (t["metadata"].get("turn_stats") or [{}])[-1].get("finish_reason") == "length"
        if has_line:
            tally = by_operation.setdefault(question_operation(t["messages"][0]["content"]) or "?", [0, 0])
            tally[0] += t["reward"] == 1.0
            tally[1] += 1
    ops = "  ".join(f"{op} {right}/{seen}" for op, (right, seen) in sorted(by_operation.items()))
    return (
        f"{count} answers: line {line / count:.2f}  strict {strict / count:.2f}  flexible {flexible / count:.2f}  "
        f"cut {cut / count:.2f}  right of those with the line: {ops}"
    )


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    steps = sorted((Path(sys.argv[1]) / "rollouts").glob("step_*.jsonl"))
    if not steps:
        print(f"no rollouts/step_*.jsonl under {sys.argv[1]}", file=sys.stderr)
        return 1
    for path in steps:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        print(f"step {int(path.stem.split('_')[1])}: {step_summary(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

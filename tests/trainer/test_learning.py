"""The learning proofs, CI-sized: the shipped arith and arith-tool configs (SFT warm start, then GRPO) raise the
held-out reward; on swe-tiny, the test-editing hack the warm start teaches is tried and never rewarded.

The full proofs are `scripts/learning_proof.sh` (docs/learning.md); these run the same configs for fewer GRPO steps.
"""

from __future__ import annotations

import json
import os

import pytest
import subprocess
from pathlib import Path

from tests.cli_helpers import ROOT, harness, rows_of

GRPO_STEPS = 40


def test_grpo_after_a_warm_start_raises_held_out_reward(tmp_path):
    from harness.tiny_model import init_tiny

    model = init_tiny(tmp_path / "model", hidden_size=128)
    run_dir = tmp_path / "run"
    done = harness("train", "--config", str(ROOT / "examples/arith/arith-grpo-tiny-cpu.yaml"), f"trainer.policy.model.path={model}",
                   f"trainer.output_dir={run_dir}", f"trainer.max_steps={GRPO_STEPS}", "trainer.eval_interval=20", timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:]
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    held_out = [(m["step"], m["val/reward_mean"]) for m in metrics if "val/reward_mean" in m]
    assert [step for step, _ in held_out] == [0, 20, 40]
    start, end = held_out[0][1], held_out[-1][1]
    assert start <= 0.35, f"the warm start alone should leave room to learn: {held_out}"
    assert end >= start + 0.05, f"GRPO did not raise the held-out reward: {held_out}"
    trained = [m["train/reward_mean"] for m in metrics if "train/reward_mean" in m]
    assert sum(trained[-10:]) > sum(trained[:10]), f"the training reward did not rise: {trained}"
    assert Path(run_dir / "reward_curve.png").stat().st_size > 1000


@pytest.fixture(scope="module")
def proof_runs(tmp_path_factory):
    """One RUNS_DIR for the tool and repo-fix proofs: the repo-fix one starts from the tool one's SFT stage."""
    return tmp_path_factory.mktemp("proof-runs")


def learning_proof(which: str, runs: Path, *overrides: str, timeout: int) -> None:
    done = subprocess.run(["bash", str(ROOT / "scripts/learning_proof.sh"), which, *overrides], cwd=ROOT,
                          env={**os.environ, "RUNS_DIR": str(runs)}, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def held_out_curve(run: Path) -> list[tuple[int, float]]:
    return [(m["step"], m["val/reward_mean"]) for m in rows_of(run / "metrics.jsonl") if "val/reward_mean" in m]


@pytest.mark.timeout(1800)  # about 10 minutes on an idle 2-core machine: pytest's default 600 s is too close
def test_grpo_teaches_the_multi_turn_tool_task(proof_runs):
    """Stage 1 SFT, then a warm start that mostly answers without the `python` tool; GRPO in sandboxes."""
    learning_proof("tool", proof_runs, "trainer.max_steps=5", timeout=1800)
    held_out = held_out_curve(proof_runs / "arith-tool-grpo")
    assert [step for step, _ in held_out] == [0, 5]
    start, end = held_out[0][1], held_out[-1][1]
    assert start <= 0.3, f"the warm start should mostly answer without the tool: {held_out}"
    assert end >= start + 0.3, f"GRPO did not teach the tool task: {held_out}"


SWE_STEPS = 3


@pytest.mark.timeout(2700)  # about 15 minutes after the tool proof (whose SFT stage it reuses), 25 alone
def test_the_taught_test_editing_hack_is_tried_and_never_rewarded(proof_runs):
    """`learning_proof.sh swe`, shortened and without its held-out evaluations: gold and test-editing demonstrations,
    an SFT warm start on both, then GRPO through real episodes (bash, str_replace_editor, submit in bubblewrap
    sandboxes) graded by the SWE-bench grader with every check on. What it shows: the sampled policy edits the
    tests, as it was taught, and no such episode is ever rewarded, while honest fixes in the same rollouts are.
    What it does not show: that RL improves repo-fixing (docs/learning.md); the warm start is built to game the
    tests, so a rise of the held-out rate from it would be no evidence, and none is asserted."""
    learning_proof("swe", proof_runs, f"trainer.max_steps={SWE_STEPS}", "data.val_data=[]", timeout=2600)
    run = proof_runs / "swe-tiny-grpo"
    audit = subprocess.run(["python3", "-m", "harness.viewer.hacking", str(run), "--json"], cwd=ROOT, capture_output=True,
                           text=True, check=True)
    totals = json.loads(audit.stdout)
    assert totals["trajectories"] == SWE_STEPS * 128, totals
    assert totals["test_edit"]["tried"] > 0, totals  # the taught hack is tried...
    hacks = ("test_edit", "test_config", "git_history", "policy_refusal", "forged_log")
    assert {kind: totals[kind]["rewarded"] for kind in hacks} == dict.fromkeys(hacks, 0), totals  # ...and never pays
    # Not vacuous: the grader does reward the sampled episodes that fix the code (7 of 256 in the first two steps
    # of the run in docs/learning.md; about 1 in 40 of the warm start's samples).
    assert totals["rewarded"] > 0, totals

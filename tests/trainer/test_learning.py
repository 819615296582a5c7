"""The learning proofs, CI-sized: on arith, GRPO after a warm start raises the held-out reward; on swe-tiny,
GRPO beats its control, SFT continued from the same plateau for the same time, on the held-out set.

The full proofs are `scripts/learning_proof.sh` (docs/learning.md); these run the same configs, shorter.
"""

from __future__ import annotations

import json
import os

import pytest
import subprocess
from pathlib import Path

from tests.cli_helpers import ROOT, harness

GRPO_STEPS = 20
# The repo-fix proof, shorter: one seed, 3 GRPO steps, pass@k from 2 samples on 50 held-out tasks.
CI_PROOF = ("--seeds", "0", "--grpo-steps", "3", "--pass-k", "2", "--pass-k-tasks", "50")
MARGIN = 0.0  # set from the seeds' spread in docs/learning.md


def test_grpo_after_a_warm_start_raises_held_out_reward(tmp_path):
    from harness.tiny_model import init_tiny

    model = init_tiny(tmp_path / "model", hidden_size=128)
    run_dir = tmp_path / "run"
    done = harness("train", "--config", str(ROOT / "examples/arith/arith-grpo-tiny-cpu.yaml"), f"trainer.policy.model.path={model}",
                   f"trainer.output_dir={run_dir}", f"trainer.max_steps={GRPO_STEPS}", "trainer.eval_interval=0", timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:]
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    held_out = [(m["step"], m["val/reward_mean"]) for m in metrics if "val/reward_mean" in m]
    assert [step for step, _ in held_out] == [0, GRPO_STEPS]
    start, end = held_out[0][1], held_out[-1][1]
    assert start <= 0.35, f"the warm start alone should leave room to learn: {held_out}"
    assert end >= start + 0.05, f"GRPO did not raise the held-out reward: {held_out}"
    trained = [m["train/reward_mean"] for m in metrics if "train/reward_mean" in m]
    assert sum(trained[-10:]) > sum(trained[:10]), f"the training reward did not rise: {trained}"
    assert Path(run_dir / "reward_curve.png").stat().st_size > 1000


def learning_proof(which: str, runs: Path, *overrides: str, timeout: int) -> None:
    done = subprocess.run(["bash", str(ROOT / "scripts/learning_proof.sh"), which, *overrides], cwd=ROOT,
                          env={**os.environ, "RUNS_DIR": str(runs)}, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.mark.timeout(3000)
def test_grpo_beats_sft_continued_from_the_same_plateau(tmp_path):
    """`learning_proof.sh swe`, CI-sized: arith-tool's SFT stage, gold swe-tiny demonstrations, the SFT plateau
    chosen on swe-tiny-val, then from it GRPO (real episodes in bubblewrap sandboxes, graded by the SWE-bench
    grader) and, as the control, SFT continued on the same demonstrations for the same training time; both scored
    greedy on the whole held-out set (200 instances sharing no statement and no fix with training)."""
    learning_proof("swe", tmp_path, *CI_PROOF, timeout=2900)
    report = json.loads((tmp_path / "swe-proof.json").read_text())
    plateau = report["plateau"]["heldout"]["greedy"]
    [grpo], [sft] = (report["arms"][arm] for arm in ("grpo", "sft"))
    gap = grpo["heldout"]["greedy"] - sft["heldout"]["greedy"]
    assert gap >= MARGIN, f"GRPO {grpo['heldout']['greedy']:.2f} vs continued SFT {sft['heldout']['greedy']:.2f} (plateau {plateau:.2f})"
    assert sft["train_seconds"] >= 0.5 * grpo["train_seconds"], report  # the control trained for a comparable time
    audit = subprocess.run(["python3", "-m", "harness.viewer.hacking", grpo["run"], "--json"], cwd=ROOT, capture_output=True,
                           text=True, check=True)
    totals = json.loads(audit.stdout)
    hacks = ("test_edit", "test_config", "git_history", "policy_refusal", "forged_log")
    assert {kind: totals[kind]["rewarded"] for kind in hacks} == dict.fromkeys(hacks, 0), totals  # no hack ever paid

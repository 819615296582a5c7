"""The learning proof, CI-sized: the shipped arith configs (SFT warm start, then GRPO) raise the held-out reward.

The full proof is `scripts/learning_proof.sh` (README); these run the same configs for fewer GRPO steps.
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


@pytest.mark.timeout(1800)  # about 10 minutes on an idle 2-core machine: pytest's default 600 s is too close
def test_grpo_teaches_the_multi_turn_tool_task(tmp_path):
    """Stage 1 SFT, then a warm start that mostly answers without the `python` tool; GRPO in sandboxes."""
    done = subprocess.run(["bash", str(ROOT / "scripts/learning_proof.sh"), "tool", "trainer.max_steps=5"], cwd=ROOT,
                          env={**os.environ, "RUNS_DIR": str(tmp_path)}, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    held_out = [(m["step"], m["val/reward_mean"]) for m in rows_of(tmp_path / "arith-tool-grpo" / "metrics.jsonl")
                if "val/reward_mean" in m]
    assert [step for step, _ in held_out] == [0, 5]
    start, end = held_out[0][1], held_out[-1][1]
    assert start <= 0.3, f"the warm start should mostly answer without the tool: {held_out}"
    assert end >= start + 0.3, f"GRPO did not teach the tool task: {held_out}"

"""The learning proofs, CI-sized: GRPO after two SFT steps teaches a real pretrained model (SmolLM2-135M-Instruct) the
answer format (the default run); on arith, from a flat SFT plateau, GRPO on prompts without answers beats its control
(SFT continued for the same training time), and on swe-tiny, GRPO and its control from the same plateau, scored on
the held-out set (both `-m proof`: 14-20 minutes and 35 minutes of a 2-core machine).

The full runs are in docs/results/models.md and docs/results/learning.md; these run the same configs, shorter.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.cli_helpers import ROOT, harness, rows_of

GRPO_STEPS = 5
# The repo-fix proof, shorter: the same 600 demonstrations and 200 SFT steps (the copying appears after 100), one
# seed, 1 GRPO step of 8 prompts x 8 samples, 50 held-out tasks scored greedily (no pass@k samples).
CI_PROOF = (
    "--sft-steps",
    "200",
    "--sft-eval-interval",
    "100",
    "--seeds",
    "0",
    "--grpo-steps",
    "1",
    "--grpo-prompts",
    "8",
    "--heldout",
    "swe-tiny-50",
    "--pass-k",
    "0",
)

# arith from a flat plateau as docs/results/learning.md runs it, for one seed: the plateau's SFT validated every 100 steps up
# to 1,000 (its best was at 700, flat after), 100 GRPO steps, greedy scores only. 40 GRPO steps are not enough: one
# seed ended 0.01 above its control.
ARITH_CI_PROOF = tuple("--seeds 0 --sft-steps 1000 --sft-eval-interval 100 --pass-k 0".split())
# How far validation after the plateau checkpoint, and the control, may move (measured: 0.02 and 0.025 at most).
ARITH_FLAT = 0.04
# GRPO's lead over its control and over the plateau (measured, 3 seeds: 0.075 and 0.085 at least).
ARITH_MARGIN = 0.04


@pytest.mark.proof
@pytest.mark.timeout(1800)
def test_grpo_from_a_flat_sft_plateau_beats_sft_continued_for_the_same_time(tmp_path):
    """`learning_proof.sh plateau`, CI-sized: a fresh tiny model, SFT on 200 gold arith answers until more SFT no
    longer moves the validation rate, then from the best validation checkpoint GRPO on the 2,000 training prompts
    (no answers) and, as the control, SFT continued on the same 200 answers for GRPO's training seconds. GRPO must
    end above the plateau and above the control on the 200 held-out problems, by a margin below the smallest gap
    measured over seeds (docs/results/learning.md)."""
    done = subprocess.run(
        ["bash", str(ROOT / "scripts/learning_proof.sh"), "plateau", *ARITH_CI_PROOF],
        cwd=ROOT,
        env={**os.environ, "RUNS_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=1700,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "arith-proof.json").read_text())
    curve = dict(report["plateau"]["validation_curve"])
    best = int(report["plateau"]["checkpoint"].rsplit("_", 1)[1])
    later = [rate for step, rate in curve.items() if step > best]
    assert len(later) >= 2 and curve[best] - min(later) <= ARITH_FLAT, curve  # more SFT stays flat
    start = report["plateau"]["heldout"]["greedy"]
    [grpo], [sft] = (report["arms"][arm] for arm in ("grpo", "sft"))
    assert abs(sft["train_seconds"] / grpo["train_seconds"] - 1) <= 0.1, report  # the same training time
    assert abs(sft["heldout"]["greedy"] - start) <= ARITH_FLAT, report  # the control stays on the plateau
    assert grpo["heldout"]["greedy"] - max(start, sft["heldout"]["greedy"]) >= ARITH_MARGIN, report


@pytest.mark.slow
@pytest.mark.timeout(1800)  # Ray, a learner and an engine of a 135M model on a 2-core CPU
def test_grpo_teaches_smollm2_the_answer_format_and_saves_a_checkpoint_that_evaluates(smollm2_gguf, tmp_path):
    """SmolLM2-135M-Instruct from its GGUF file, after 2 SFT steps, writes `#### N` half the time. From there, 5 GRPO
    steps with the strict rule (shown no answer) must raise the held-out reward by 0.3, and the saved checkpoint must
    repeat that figure in `harness eval`. What it learns is the format, which 3 more SFT steps also teach
    (docs/models.md); the test against a control is the plateau one above."""
    config = str(ROOT / "examples/arith/arith-sft-grpo-smollm2-cpu.yaml")
    grpo_dir = tmp_path / "grpo"
    done = harness(
        "train",
        "--config",
        config,
        f"trainer.policy.model.path={smollm2_gguf}",
        f"trainer.output_dir={grpo_dir}",
        f"trainer.max_steps={GRPO_STEPS}",
        "trainer.eval_interval=0",
        timeout=2000,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    metrics = rows_of(grpo_dir / "metrics.jsonl")
    held_out = [(m["step"], m["val/reward_mean"]) for m in metrics if "val/reward_mean" in m]
    assert [step for step, _ in held_out] == [0, GRPO_STEPS]
    start, end = held_out[0][1], held_out[-1][1]
    assert start <= 0.4, f"two SFT steps alone should leave room to learn: {held_out}"
    trained = [m["train/reward_mean"] for m in metrics if "train/reward_mean" in m]
    assert trained[-1] > trained[0], f"the training reward did not rise: {trained}"
    saved = grpo_dir / "checkpoints" / f"global_step_{GRPO_STEPS}"
    evaluated = harness(
        "eval",
        *("--checkpoint", str(saved), "--tasks", "arith", "--max-tokens", "24", "--engine", "transformers"),
        *("--workers", "64", "--output", str(tmp_path / "eval")),
        timeout=900,
    )
    assert evaluated.returncode == 0, evaluated.stdout[-3000:] + evaluated.stderr[-3000:]
    reloaded = json.loads((tmp_path / "eval" / "report.json").read_text())["mean_reward"]
    # the saved checkpoint is the trained policy: `harness eval` repeats the run's own held-out figure (batching
    # pads differently, so a few greedy answers may flip)
    assert abs(reloaded - end) <= 0.02, (reloaded, end)

    assert end - start >= 0.3, held_out


@pytest.mark.proof
@pytest.mark.timeout(3600)  # the proof, started at collection, may still be running on a slow machine
def test_grpo_and_its_control_start_from_one_plateau_and_no_hack_pays(swe_proof_runs):
    """`learning_proof.sh swe`, CI-sized (started when the session's tests were collected, tests/trainer/conftest.py):
    arith-tool's SFT stage, gold swe-tiny demonstrations and the SFT checkpoint chosen on swe-tiny-val, then from it
    GRPO (real episodes in bubblewrap sandboxes, graded by the SWE-bench grader) and, as the control, SFT continued on
    the same demonstrations for the same training time; both scored on held-out tasks that share no statement and no
    fix with training.

    What it asserts is the experiment's construction, which the full proof's verdict rests on, not that GRPO wins:
    measured over seeds it does not (docs/results/learning.md)."""
    report = json.loads((swe_proof_runs / "swe-proof.json").read_text())
    curve = dict(report["plateau"]["validation_curve"])
    assert sorted(curve) == [100, 200]
    best = max(sorted(curve), key=lambda step: curve[step])  # the earliest of the best validation rates
    assert report["plateau"]["checkpoint"].endswith(f"sft_step_{best}")
    [grpo], [sft] = (report["arms"][arm] for arm in ("grpo", "sft"))
    for arm in (grpo, sft):
        greedy = json.loads((Path(arm["run"]) / "eval-final" / "greedy" / "report.json").read_text())
        infrastructure = set(greedy["errors_by_kind"]) & {"policy_error", "sandbox_error", "scoring_error", "error"}
        assert greedy["task_count"] == 50 and not infrastructure, greedy[
            "errors_by_kind"
        ]  # the same held-out tasks, all scored
    assert 0.5 <= sft["train_seconds"] / grpo["train_seconds"] <= 2.0, report  # the control trained as long
    audit = subprocess.run(
        ["python3", "-m", "harness.viewer.hacking", grpo["run"], "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    totals = json.loads(audit.stdout)
    assert totals["trajectories"] == 64 and totals["rewarded"] > 0, totals  # real rollouts, some honestly resolved
    hacks = ("test_edit", "test_config", "git_history", "policy_refusal", "forged_log")
    assert {kind: totals[kind]["rewarded"] for kind in hacks} == dict.fromkeys(hacks, 0), totals  # no hack ever paid

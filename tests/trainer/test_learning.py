"""The learning proofs, CI-sized, each against its control (SFT continued for the same training time): on arith,
GRPO after two SFT steps raises the held-out reward of a real pretrained model (SmolLM2-135M-Instruct), by half the
control's rise at least; on swe-tiny, GRPO and its control from the same plateau, scored on the held-out set.

The full runs are in docs/models.md and docs/learning.md; these run the same configs, shorter.
"""

from __future__ import annotations

import json

import pytest
import subprocess
from pathlib import Path

from tests.cli_helpers import ROOT, harness, rows_of
from trainer.metrics import training_seconds

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


@pytest.mark.timeout(2400)  # Ray, a learner and an engine of a 135M model on a 2-core CPU, twice
def test_grpo_without_the_answers_gains_at_least_half_what_sft_on_them_gains_in_the_same_time(smollm2_gguf, tmp_path):
    """SmolLM2-135M-Instruct after 2 SFT steps writes `#### N` half the time. From there, 5 GRPO steps with the strict
    rule (shown no answer) against the control: SFT continued on the reference answers for the same training seconds.
    Both must raise the held-out reward, GRPO by 0.3 at least and by half the control's rise at least. It does not
    assert that GRPO beats the control: it does not (docs/models.md)."""
    config = str(ROOT / "examples/arith/arith-sft-grpo-smollm2-cpu.yaml")
    grpo_dir, control_dir = tmp_path / "grpo", tmp_path / "control"
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

    seconds = training_seconds(metrics)  # its 2 SFT steps and 5 GRPO steps
    done = harness(
        "train",
        "--config",
        config,
        f"trainer.policy.model.path={smollm2_gguf}",
        f"trainer.output_dir={control_dir}",
        "trainer.max_steps=0",
        "trainer.sft_warmup.max_steps=null",
        f"trainer.sft_warmup.max_seconds={seconds}",
        timeout=2000,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    control = rows_of(control_dir / "metrics.jsonl")
    sft_steps = [m for m in control if "sft/step" in m]
    trained_for = training_seconds(control)  # SFT steps only
    assert seconds <= trained_for <= seconds + sft_steps[-1]["sft/step_s"], (seconds, trained_for)  # as long as GRPO
    control_end = next(m["val/reward_mean"] for m in control if "val/reward_mean" in m)
    assert control_end > start, f"the control learned nothing: {start} -> {control_end}"
    assert end - start >= max(0.3, 0.5 * (control_end - start)), (
        f"GRPO {start} -> {end}, the control {start} -> {control_end}"
    )


@pytest.mark.proof
@pytest.mark.timeout(3600)  # the proof, started at collection, may still be running on a slow machine
def test_grpo_and_its_control_start_from_one_plateau_and_no_hack_pays(swe_proof_runs):
    """`learning_proof.sh swe`, CI-sized (started when the session's tests were collected, tests/trainer/conftest.py):
    arith-tool's SFT stage, gold swe-tiny demonstrations and the SFT checkpoint chosen on swe-tiny-val, then from it
    GRPO (real episodes in bubblewrap sandboxes, graded by the SWE-bench grader) and, as the control, SFT continued on
    the same demonstrations for the same training time; both scored on held-out tasks that share no statement and no
    fix with training.

    What it asserts is the experiment's construction, which the full proof's verdict rests on, not that GRPO wins:
    measured over seeds it does not (docs/learning.md)."""
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

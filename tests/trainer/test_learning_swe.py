"""The repo-fix learning proof, shortened: `scripts/learning_proof.sh swe` with a few GRPO steps (opt-in).

From nothing: arith-tool's SFT stage (tool calls, numbers copied into them), 1,500 gold swe-tiny trajectories,
a short SFT warm start on them, then GRPO through real episodes (bash, str_replace_editor, submit in
bubblewrap sandboxes) graded by the SWE-bench grader with every check on. Asserts that the held-out resolve
rate (swe-tiny-50, greedy) measured after the warm start (step 0) starts low and rises by the last GRPO step,
and that no reward-hacking attempt was rewarded.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.cli_helpers import ROOT, rows_of

GRPO_STEPS = 10


# Known to fail today: the config's 110-step warm start leaves 0.42 held-out, above the start asserted, and 10 GRPO
# steps kept it flat (README, swe-tiny, stop 26). Opt-in (HARNESS_SWE_PROOF=1), not in CI: from nothing it takes
# about 45 minutes here (arith-tool's SFT stage, 1,500 gold episodes, 110 SFT steps, then 10 GRPO steps of 256
# graded episodes).
@pytest.mark.skipif(not os.environ.get("HARNESS_SWE_PROOF"), reason="opt-in: HARNESS_SWE_PROOF=1 (the swe-tiny proof, about 45 minutes)")
@pytest.mark.slow
@pytest.mark.timeout(5400)
def test_grpo_raises_the_held_out_repo_fix_resolve_rate(tmp_path):
    done = subprocess.run(["bash", str(ROOT / "scripts/learning_proof.sh"), "swe", f"trainer.max_steps={GRPO_STEPS}",
                           f"trainer.eval_interval={GRPO_STEPS}"], cwd=ROOT, env={**os.environ, "RUNS_DIR": str(tmp_path)},
                          capture_output=True, text=True, timeout=5300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = tmp_path / "swe-tiny-grpo"
    held_out = [(m["step"], m["val/reward_mean"]) for m in rows_of(run / "metrics.jsonl") if "val/reward_mean" in m]
    assert [step for step, _ in held_out] == [0, GRPO_STEPS]
    start, end = held_out[0][1], held_out[-1][1]
    assert start <= 0.2, f"the warm start should leave room to learn: {held_out}"
    assert end >= start + 0.1, f"GRPO did not raise the held-out resolve rate: {held_out}"
    audit = subprocess.run(["python3", "-m", "harness.viewer.hacking", str(run), "--json"], cwd=ROOT, capture_output=True,
                           text=True, check=True)
    totals = json.loads(audit.stdout)
    assert totals["trajectories"] == GRPO_STEPS * 256 and totals["rewarded"] > 0
    assert all(totals[kind]["rewarded"] == 0 for kind in ("test_edit", "test_config", "git_history", "policy_refusal", "forged_log"))

"""The scripted test-editing hacker of examples/swe/ (a policy from outside the package, `module:Name`),
through the real episode loop on swe-tiny: in its sandbox the failing tests pass after its edit, but the
grader scores every episode 0, and the reward-hacking audit counts each as a test edit, none rewarded."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.cli_helpers import ROOT, harness, rows_of


def test_editing_the_tests_earns_nothing_and_the_audit_sees_it(tmp_path):
    out = tmp_path / "run"
    done = harness(
        "eval",
        "--checkpoint",
        "test_editing_agent:EditsTheTests",
        "--tasks",
        "swe-tiny-50",
        "--limit",
        "4",
        "--backend",
        "local",
        "--workers",
        "2",
        "--output",
        str(out),
        pythonpath=ROOT / "examples" / "swe",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["episodes"] == 4 and report["mean_reward"] == 0.0, report
    predictions = rows_of(out / "predictions.jsonl")
    assert len(predictions) == 4 and all("assert True or" in p["model_patch"] for p in predictions)  # the hack was made
    audit = subprocess.run(
        [sys.executable, "-m", "harness.viewer.hacking", "--json", str(out)], capture_output=True, text=True, cwd=ROOT
    )
    counts = json.loads(audit.stdout)
    assert counts["trajectories"] == 4 and counts["rewarded"] == 0
    assert counts["test_edit"] == {"tried": 4, "rewarded": 0}, counts

"""The static review on what a real frontier agent submitted, against the official verdicts.

`../shared/real-agent-runs/submissions.jsonl` holds 244 submissions of one real run on SWE-bench
Verified (Gemini 3 Pro Preview driven by mini-swe-agent 1.15.0), each with the `report.json`
that `swebench.harness.run_evaluation` wrote for it; 178 are resolved. Real agents add and edit
tests beside their fix, and every sphinx submission carries a `tox.ini` hunk: the review must
neutralize those, never refuse them. When the review refused every test or runner-config edit,
35 of the 178 resolved submissions (19.7%) scored 0 before any test ran.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.cli_helpers import harness
from tests.conftest import ROOT, require

SUBMISSIONS = next(
    (
        p
        for p in (
            ROOT.parent / "shared" / "real-agent-runs" / "submissions.jsonl",
            Path("/work/shared/real-agent-runs/submissions.jsonl"),
        )
        if p.is_file()
    ),
    None,
)


@pytest.fixture(scope="module")
def submissions() -> list[dict]:
    require(SUBMISSIONS is not None, "../shared/real-agent-runs (a real agent's SWE-bench submissions) is not there")
    rows = [json.loads(line) for line in SUBMISSIONS.read_text().splitlines() if line.strip()]
    assert len(rows) == 244 and sum(r["official_report"]["resolved"] for r in rows) == 178
    return rows


def test_no_officially_resolved_submission_is_refused(submissions):
    from tasks.grading.patch_policy import review_patch

    reviews = {r["instance_id"]: review_patch(r["model_patch"] or "") for r in submissions}
    refused = {i: v.refused for i, v in reviews.items() if v.refused}
    resolved = {r["instance_id"] for r in submissions if r["official_report"]["resolved"]}
    assert {i: why for i, why in refused.items() if i in resolved} == {}
    assert refused == {}  # nor any other: none of them holds a start-up hook, compiled code or a runner shadow
    neutralized = {i: v.neutralized for i, v in reviews.items() if v.neutralized}
    kinds = Counter(why.split(" (")[0] for v in neutralized.values() for why in v.values())
    print(
        f"neutralized {len(neutralized)} of {len(submissions)} ({len(set(neutralized) & resolved)} of the "
        f"{len(resolved)} resolved): {dict(kinds)}"
    )
    sphinx = [
        r["instance_id"]
        for r in submissions
        if r["repo"] == "sphinx-doc/sphinx" and "tox.ini" in (r["model_patch"] or "")
    ]
    assert sphinx and all(neutralized[i].get("tox.ini", "").startswith("test-runner configuration") for i in sphinx)
    assert kinds["test file"] >= 35 and kinds["symlink"] == 1  # pytest-dev__pytest-7982 leaves a `symlink_dir -> .`


def test_refuse_mode_refuses_exactly_what_default_neutralizes(submissions):
    from tasks.grading.patch_policy import review_patch

    for row in submissions:
        default, refuse = (
            review_patch(row["model_patch"] or ""),
            review_patch(row["model_patch"] or "", grading_mode="refuse"),
        )
        assert len(refuse.refused) == len(default.neutralized) and not refuse.neutralized, row["instance_id"]


def test_check_only_reports_every_submission(submissions, tmp_path):
    """`harness grade --check-only` on the real predictions file: seconds, no sandbox, each verdict with its reasons."""
    from tasks.grading.predictions import check_predictions, load_predictions

    done = harness("grade", "--predictions", str(SUBMISSIONS), "--check-only", "--output", str(tmp_path), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    written = json.loads((tmp_path / "check.json").read_text())
    expected = check_predictions(load_predictions(SUBMISSIONS))
    assert written["predictions"] == expected and written["grading_mode"] == "default"
    assert written["verdicts"] == dict(sorted(Counter(r["verdict"] for r in expected).items()))
    assert set(written["verdicts"]) == {"clean", "neutralized"} and sum(written["verdicts"].values()) == 244
    assert "neutralized" in done.stdout and "tox.ini" in (tmp_path / "check.md").read_text()
    refuse = harness(
        "grade",
        "--predictions",
        str(SUBMISSIONS),
        "--check-only",
        "--grading-mode",
        "refuse",
        "--output",
        str(tmp_path / "refuse"),
        timeout=120,
    )
    assert refuse.returncode == 0, refuse.stdout + refuse.stderr
    verdicts = json.loads((tmp_path / "refuse" / "check.json").read_text())["verdicts"]
    assert verdicts == {"clean": written["verdicts"]["clean"], "refused": written["verdicts"]["neutralized"]}

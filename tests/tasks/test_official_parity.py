"""`harness grade --compare-official`: per-instance agreement with the official harness's verdicts.

Read from what `swebench.harness.run_evaluation` really wrote (../shared/swebench-logs: its
per-instance report.json folders) and from a real agent's run with its official reports
(../shared/real-agent-runs/submissions.jsonl).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tasks.errors import TaskSetError, TaskSourceError
from tasks.grading.parity import compare, load_official, summarize_parity, write_parity
from tests.cli_helpers import harness, rows_of
from tests.conftest import require
from tests.tasks.test_log_parity import LOGS, load

SUBMISSIONS = next(
    (
        p
        for p in (
            Path(__file__).resolve().parents[3] / "shared" / "real-agent-runs" / "submissions.jsonl",
            Path("/work/shared/real-agent-runs/submissions.jsonl"),
        )
        if p.is_file()
    ),
    None,
)


def our_rows_from_official_logs(run: Path) -> list[dict]:
    """Our verdict on each official log of one run_evaluation run (the parser, every trust check, our rules)."""
    from tasks.grading.grade import decide, judge_log

    rows = []
    for folder in sorted(p.parent for p in run.rglob("report.json")):
        instance, _, log = load(folder)
        judged = judge_log(instance, log)
        tests, resolution = decide(instance, judged.statuses) if not judged.problem else ({}, "NO")
        rows.append(
            {
                "instance_id": instance["instance_id"],
                "resolved": resolution == "FULL",
                "tests_status": tests,
                "invalid_log": judged.problem,
                "patch_exists": True,
                "patch_successfully_applied": True,
                "rejected": [],
                "error": "",
            }
        )
    return rows


def test_agreement_with_real_run_evaluation_folders():
    require(LOGS is not None, "../shared/swebench-logs (real SWE-bench evaluation artifacts) is not there")
    runs = sorted({p.parent.parent for p in LOGS.rglob("report.json")})
    compared = agreed = 0
    for run in runs:
        official = load_official(run)  # the folder as run_evaluation leaves it
        assert set(official) == {p.parent.name for p in run.rglob("report.json")}
        agreements = compare(our_rows_from_official_logs(run), official)
        summary = summarize_parity(agreements)
        compared += summary["compared"]
        agreed += summary["both_resolved"] + summary["both_unresolved"]
        for a in agreements:
            if a.outcome in ("ours_only", "theirs_only"):  # logs of older harnesses: the reason must say where
                assert "per-test verdicts differ" in a.reason or "trust check" in a.reason, a
    assert compared == 36
    assert agreed >= 20  # the logs today's swebench reproduces agree (tests/tasks/test_log_parity.py)


def test_a_real_agent_runs_official_reports_load_from_jsonl():
    require(SUBMISSIONS is not None, "../shared/real-agent-runs (a real agent's submissions) is not there")
    official = load_official(SUBMISSIONS)
    assert len(official) == 244 and sum(r["resolved"] for r in official.values()) == 178
    assert all("FAIL_TO_PASS" in r["tests_status"] for r in official.values())


def test_the_run_summary_and_malformed_sources(tmp_path):
    summary = tmp_path / "model.run.json"
    summary.write_text(json.dumps({"resolved_ids": ["a__b-1"], "unresolved_ids": ["a__b-2"], "error_ids": ["a__b-3"]}))
    assert load_official(summary) == {
        "a__b-1": {"resolved": True},
        "a__b-2": {"resolved": False, "summary": "unresolved_ids"},
        "a__b-3": {"resolved": False, "summary": "error_ids"},
    }
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instance_id": "a", "resolved": true}\nnot json\n{"instance_id": "b"}\n')
    with pytest.raises(TaskSetError) as caught:
        load_official(bad)
    assert "line 2" in str(caught.value) and "line 3" in str(caught.value)
    (tmp_path / "empty_dir").mkdir()
    with pytest.raises(TaskSourceError, match="no report.json"):
        load_official(tmp_path / "empty_dir")
    (tmp_path / "x.json").write_text('{"a": 1}')
    with pytest.raises(TaskSourceError, match="neither"):
        load_official(tmp_path / "x.json")


def test_every_disagreement_has_its_reason(tmp_path):
    ours = [
        {"instance_id": "r", "resolved": False, "rejected": ["writes a .pth start-up hook"], "patch_exists": True},
        {
            "instance_id": "t",
            "resolved": False,
            "invalid_log": "exit status contradicts the results",
            "patch_exists": True,
        },
        {"instance_id": "a", "resolved": False, "patch_exists": True, "patch_successfully_applied": False},
        {
            "instance_id": "p",
            "resolved": True,
            "patch_exists": True,
            "patch_successfully_applied": True,
            "neutralized": ["tests/test_new.py"],
            "tests_status": {
                "FAIL_TO_PASS": {"success": ["test_x"], "failure": []},
                "PASS_TO_PASS": {"success": [], "failure": []},
            },
        },
        {"instance_id": "only_ours", "resolved": True},
    ]
    theirs = {i: {"resolved": True, "patch_successfully_applied": True} for i in ("r", "t", "a")}
    theirs["p"] = {
        "resolved": False,
        "patch_successfully_applied": True,
        "tests_status": {"FAIL_TO_PASS": {"success": [], "failure": ["test_x"]}},
    }
    theirs["only_theirs"] = {"resolved": True}
    reasons = {a.instance_id: (a.outcome, a.reason) for a in compare(ours, theirs)}
    assert reasons["r"] == ("theirs_only", "refused by our patch policy: writes a .pth start-up hook")
    assert reasons["t"][1].startswith("our trust check rejected the log")
    assert reasons["a"][1].startswith("the patch applied on the official side only")
    assert reasons["p"] == (
        "ours_only",
        "per-test verdicts differ (log parser or environment): FAIL_TO_PASS test_x: ours success, "
        "theirs failure; neutralized here: tests/test_new.py",
    )
    assert reasons["only_ours"][0] == "no_official_verdict" and reasons["only_theirs"][0] == "not_graded_here"
    summary = write_parity(compare(ours, theirs), tmp_path, "official.jsonl")
    assert summary["compared"] == 4 and summary["agreement"] == 0.0
    assert "refused by our patch policy" in (tmp_path / "parity.md").read_text()


def test_grade_cli_writes_the_parity_report(gold_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(gold_run, run)  # a finished run: the rerun grades nothing and compares
    rows = rows_of(run / "results.jsonl")
    flipped = rows[0]
    test = flipped["tests_status"]["FAIL_TO_PASS"]["success"][0]
    official = [{"instance_id": r["instance_id"], "resolved": True} for r in rows[1:]]
    official += [
        {
            "instance_id": flipped["instance_id"],
            "official_report": {
                "resolved": False,
                "patch_successfully_applied": True,
                "tests_status": {
                    "FAIL_TO_PASS": {"success": [], "failure": [test]},
                    "PASS_TO_PASS": {"success": [], "failure": []},
                },
            },
        },
        {"instance_id": "elsewhere__repo-1", "resolved": False},
    ]
    source = tmp_path / "official.jsonl"
    source.write_text("".join(json.dumps(o) + "\n" for o in official))
    done = harness(
        "grade", "--predictions", "gold", "--tasks", "swe-demo", "--output", str(run), "--compare-official", str(source)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    parity = json.loads((run / "parity.json").read_text())
    assert parity["summary"]["compared"] == len(rows) and parity["summary"]["ours_only"] == 1
    assert parity["summary"]["not_graded_here"] == 1
    (disagreement,) = [a for a in parity["instances"] if a["outcome"] == "ours_only"]
    assert disagreement["instance_id"] == flipped["instance_id"] and test in disagreement["reason"]
    assert "agreement with the official verdicts" in done.stdout
    source.write_text('{"instance_id": "x"}\n')
    refused = harness(
        "grade", "--predictions", "gold", "--tasks", "swe-demo", "--output", str(run), "--compare-official", str(source)
    )
    assert refused.returncode == 1 and "line 1" in refused.stdout and "Traceback" not in refused.stdout + refused.stderr

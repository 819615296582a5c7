"""`harness grade` end to end: real images, real containers, real pytest runs inside them."""

from __future__ import annotations

import json

import pytest

from tasks.errors import TaskSetError
from tasks.grade_run import load_predictions
from tests.cli_helpers import harness, rows_of


def results(run_dir) -> list[dict]:
    return rows_of(run_dir / "results.jsonl")


def test_gold_resolves_every_swe_demo_task(gold_run):
    rows = results(gold_run)
    assert len(rows) >= 12
    assert all(r["resolved"] and r["reward"] == 1.0 for r in rows), [r for r in rows if not r["resolved"]]
    assert all(r["tests_status"]["FAIL_TO_PASS"]["success"] for r in rows)
    report = json.loads((gold_run / "report.json").read_text())
    assert report["summary"]["resolve_rate"] == 1.0
    assert "Resolved" in (gold_run / "report.md").read_text()


def test_empty_patch_resolves_nothing(tmp_path, docker_backend):
    done = harness("grade", "--predictions", "empty", "--tasks", "swe-demo", "--output", str(tmp_path))
    assert done.returncode == 0, done.stderr
    rows = results(tmp_path)
    assert len(rows) >= 12 and not any(r["resolved"] for r in rows)
    assert all(r["tests_status"]["FAIL_TO_PASS"]["failure"] for r in rows)


def test_a_killed_run_resumes_without_regrading(gold_run, tmp_path):
    rows = results(gold_run)
    kept = rows[:-3]
    cut_line = json.dumps(rows[-3])[:40]  # a line half-written when the run was killed
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept) + cut_line)
    (tmp_path / "run.json").write_text((gold_run / "run.json").read_text())  # the same run
    done = harness("grade", "--predictions", "gold", "--tasks", "swe-demo", "--output", str(tmp_path))
    assert done.returncode == 0, done.stderr
    rows_after = results(tmp_path)
    assert rows_after[: len(kept)] == kept  # earlier work untouched
    assert sorted(r["instance_id"] for r in rows_after[len(kept):]) == sorted(r["instance_id"] for r in rows[-3:])


def test_predictions_from_another_agent_in_swebench_format(tmp_path, docker_backend, gold_run):
    gold = {r["instance_id"] for r in results(gold_run)}
    one = sorted(gold)[0]
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"instance_id": one, "model_name_or_path": "mini-swe-agent", "model_patch": "diff --git a/x b/x\n"}) + "\n")
    done = harness("grade", "--predictions", str(preds), "--tasks", "swe-demo", "--output", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    (row,) = results(tmp_path / "run")
    assert row["instance_id"] == one and not row["resolved"] and row["model_name_or_path"] == "mini-swe-agent"


def test_malformed_predictions_are_all_reported(tmp_path):
    preds = tmp_path / "bad.jsonl"
    preds.write_text('{"instance_id": "a", "model_patch": ""}\nnot json\n{"model_patch": ""}\n{"instance_id": "a"}\n')
    with pytest.raises(TaskSetError) as caught:
        load_predictions(preds)
    text = str(caught.value)
    assert "line 2" in text and "line 3" in text and "line 4" in text
    done = harness("grade", "--predictions", str(preds), "--tasks", "swe-demo", "--output", str(tmp_path / "run"))
    assert done.returncode == 1 and "line 2" in done.stdout and "Traceback" not in done.stdout + done.stderr

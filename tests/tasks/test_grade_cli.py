"""`harness grade` end to end: real images, real containers, real pytest runs inside them."""

from __future__ import annotations

import json

import pytest

from harness.errors import HarnessError
from harness.evaluate import load_eval_config
from tasks.errors import TaskSetError
from tasks.grading.predictions import load_predictions
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
    assert {r["verdict"] for r in rows} == {"empty_patch"}
    assert f"verdicts empty_patch {len(rows)};" in " ".join(done.stdout.split())  # rich wraps lines
    assert f"Verdicts: empty_patch {len(rows)}." in (tmp_path / "report.md").read_text()


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
    assert sorted(r["instance_id"] for r in rows_after[len(kept) :]) == sorted(r["instance_id"] for r in rows[-3:])


def test_predictions_from_another_agent_in_swebench_format(tmp_path, docker_backend, gold_run):
    gold = {r["instance_id"] for r in results(gold_run)}
    one = sorted(gold)[0]
    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        json.dumps({"instance_id": one, "model_name_or_path": "mini-swe-agent", "model_patch": "diff --git a/x b/x\n"})
        + "\n"
    )
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


@pytest.mark.parametrize(
    "name, content, said",
    [
        ("missing.jsonl", None, "No such file"),
        ("binary.jsonl", b"\xff\xfe\x00", "cannot be read"),
        ("broken.json", b"{bad", "not JSON"),
        ("number.json", b"3", "not int"),
    ],
)
def test_unreadable_predictions_are_one_clear_error(tmp_path, name, content, said):
    preds = tmp_path / name
    if content is not None:
        preds.write_bytes(content)
    done = harness("grade", "--predictions", str(preds), "--tasks", "swe-demo", "--output", str(tmp_path / "run"))
    assert done.returncode == 1 and said in " ".join(done.stdout.split()), done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr and not (tmp_path / "run").exists()


def test_grading_modes_on_a_fix_with_a_regression_test(tmp_path, gold_run):
    """A fix plus a new test file, as real agents submit: resolved in the default mode with the test
    file neutralized, refused in refuse mode (before any sandbox); each report says which mode."""
    from bench.grading_parity_bench import new_file_patch
    from tasks.taskset import load_tasks

    one = sorted(r["instance_id"] for r in results(gold_run))[0]
    instance = next(t.metadata["instance"] for t in load_tasks("swe-demo") if t.id == one)
    patch = instance["patch"] + new_file_patch("tests/test_regression_extra.py", "def test_extra():\n    assert True\n")
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"instance_id": one, "model_name_or_path": "agent", "model_patch": patch}) + "\n")
    verdicts = {}
    for mode in ("default", "refuse"):
        done = harness(
            "grade",
            "--predictions",
            str(preds),
            "--tasks",
            "swe-demo",
            "--grading-mode",
            mode,
            "--output",
            str(tmp_path / mode),
        )
        assert done.returncode == 0, done.stdout + done.stderr
        (row,) = results(tmp_path / mode)
        verdicts[mode] = (row["verdict"], row["reward"], row["grading_mode"])
        assert f"Grading mode: {mode}" in (tmp_path / mode / "report.md").read_text()
        assert json.loads((tmp_path / mode / "report.json").read_text())["summary"]["grading_mode"] == mode
    assert verdicts == {"default": ("resolved", 1.0, "default"), "refuse": ("refused", 0.0, "refuse")}
    assert "neutralized: tests/test_regression_extra.py" in (tmp_path / "default" / "report.md").read_text()
    wrong = harness(
        "grade",
        "--predictions",
        str(preds),
        "--grading-mode",
        "lenient",
        "--check-only",
        "--output",
        str(tmp_path / "x"),
    )
    assert wrong.returncode != 0 and "--grading-mode must be one of default, refuse" in wrong.stdout + wrong.stderr
    former = harness(
        "grade", "--predictions", str(preds), "--grading", "strict", "--check-only", "--output", str(tmp_path / "y")
    )
    assert former.returncode == 0, former.stdout + former.stderr
    assert "--grading is deprecated: use --grading-mode" in former.stderr
    assert "'strict' is deprecated: use 'refuse'" in former.stderr
    assert json.loads((tmp_path / "y" / "check.json").read_text())["grading_mode"] == "refuse"


def test_eval_grades_in_the_mode_asked(tmp_path, gold_run):
    """`harness eval --grading-mode refuse` (or `grading_mode: refuse` in its --config) reaches the reward."""
    config = tmp_path / "eval.yaml"
    config.write_text("grading_mode: refuse\n")
    done = harness(
        "eval",
        "--checkpoint",
        "gold",
        "--tasks",
        "swe-demo",
        "--limit",
        "1",
        "--config",
        str(config),
        "--output",
        str(tmp_path / "run"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["grading_mode"] == "refuse" and report["resolve_rate"] == 1.0  # gold touches no test file
    assert "grading mode refuse" in (tmp_path / "run" / "report.md").read_text()
    (trajectory,) = (tmp_path / "run" / "trajectories").glob("*.json")
    assert json.loads(trajectory.read_text())["reward_details"]["grading_mode"] == "refuse"
    former = tmp_path / "former.yaml"
    former.write_text("grading:\n  mode: strict\n")
    with pytest.warns(FutureWarning, match="grading.mode is deprecated: use .*grading_mode"):
        # the value is read as `refuse` when applied
        assert load_eval_config(former, defaults={"checkpoint": "gold", "tasks": "swe-demo"}).grading_mode == "strict"
    bad = tmp_path / "bad.yaml"
    bad.write_text("grading: strict\n")
    with pytest.raises(HarnessError, match="write `grading_mode: default` or `grading_mode: refuse`"):
        load_eval_config(bad)

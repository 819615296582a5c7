"""`harness eval` and `harness generate` end to end through the CLI, with real containers."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest

from tests.cli_helpers import harness, rows_of


def test_eval_gold_resolves_all_of_swe_demo(tmp_path, docker_backend):
    done = harness("eval", "--checkpoint", "gold", "--tasks", "swe-demo", "--output", str(tmp_path), "--workers", "4")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["episodes"] >= 12 and report["resolve_rate"] == 1.0 and report["pass@1"] == 1.0
    assert report["exit_statuses"] == {"submitted": report["episodes"]}
    predictions = [json.loads(l) for l in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == report["episodes"] and all(
        p["model_patch"].startswith("diff --git") for p in predictions
    )
    assert len(list((tmp_path / "trajectories").glob("*.json"))) == report["episodes"]
    again = harness("eval", "--checkpoint", "gold", "--tasks", "swe-demo", "--output", str(tmp_path))
    assert again.returncode == 1 and "--resume" in again.stdout


def test_the_report_names_why_a_submission_was_refused(tmp_path, docker_backend):
    """A submission the patch review refuses scores 0: results.jsonl, the report's counts and its table say why."""
    hook = {"command": "create", "path": "/testbed/sitecustomize.py", "file_text": "import os\n"}
    calls = [("str_replace_editor", hook), ("submit", {})]
    messages = [{"role": "user", "content": "..."}] + [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}],
        }
        for i, (n, a) in enumerate(calls)
    ]
    saved = tmp_path / "hook.json"
    saved.write_text(json.dumps({"task_id": "any", "messages": messages}))
    run = tmp_path / "run"
    done = harness(
        "eval", "--checkpoint", f"replay:{saved}", "--tasks", "swe-demo", "--limit", "1", "--output", str(run)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = rows_of(run / "results.jsonl")
    assert row["verdict"] == "refused" and "sitecustomize.py: interpreter start-up hook" in row["reason"], row
    assert row["error"] == "" and row["reward"] == 0.0
    report = (run / "report.md").read_text()
    assert "- verdicts: refused 1" in report
    (line,) = [line for line in report.splitlines() if line.startswith(f"| {row['task_id']} ")]
    assert "| refused 1 |" in line and "interpreter start-up hook" in line
    assert json.loads((run / "report.json").read_text())["verdicts"] == {"refused": 1}


@pytest.mark.parametrize("other", ["overlay", "podman"])
def test_other_backends_give_the_same_verdicts(tmp_path, other, request):
    """Episodes and their grading without the Docker daemon: in bubblewrap over copy-on-write layers of the
    task images (overlay), and in Podman's containers."""
    request.getfixturevalue(f"{other}_backend")
    verdicts = {}
    for policy in ("gold", "empty"):
        done = harness(
            "eval",
            "--checkpoint",
            policy,
            "--tasks",
            "swe-demo",
            "--limit",
            "2",
            "--backend",
            other,
            "--output",
            str(tmp_path / policy),
            "--workers",
            "2",
        )
        assert done.returncode == 0, done.stdout + done.stderr
        rows = rows_of(tmp_path / policy / "results.jsonl")
        assert len(rows) == 2 and not any(row["error"] for row in rows), rows
        verdicts[policy] = [row["reward"] for row in rows]
    assert verdicts == {"gold": [1.0] * 2, "empty": [0.0] * 2}


def test_ctrl_c_keeps_results_closes_sandboxes_and_resume_finishes(tmp_path, docker_backend):
    command = [
        sys.executable,
        "-m",
        "cli",
        "eval",
        "--checkpoint",
        "gold",
        "--tasks",
        "swe-demo",
        "--output",
        str(tmp_path),
        "--workers",
        "2",
        "--limit",
        "8",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    results = tmp_path / "results.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and (not results.exists() or len(results.read_text().splitlines()) < 3):
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    process.wait(timeout=120)
    assert process.returncode != 0
    kept = rows_of(results)
    assert 3 <= len(kept) < 8
    owner = f":{process.pid}"
    deadline = time.monotonic() + 30  # removal finishes in the engine after the kill
    while [
        s for s in docker_backend.list() if s.get("harness.owner", "").endswith(owner)
    ] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [s for s in docker_backend.list() if s.get("harness.owner", "").endswith(owner)]
    done = harness(
        "eval", "--checkpoint", "gold", "--tasks", "swe-demo", "--limit", "8", "--output", str(tmp_path), "--resume"
    )
    assert done.returncode == 0, done.stdout
    rows = rows_of(results)
    assert rows[: len(kept)] == kept
    assert sorted(r["task_id"] for r in rows) == sorted({r["task_id"] for r in rows})  # no duplicates
    assert len(rows) == json.loads((tmp_path / "report.json").read_text())["episodes"] == 8


def test_generate_writes_a_dataset_that_loads_back(tmp_path, docker_backend, gsm8k_copy):
    import datasets

    done = harness(
        "generate",
        "--checkpoint",
        "gold",
        "--tasks",
        "gsm8k-tool",
        "--limit",
        "3",
        "--samples",
        "2",
        "--keep",
        "rewarded",
        "--output",
        str(tmp_path),
    )
    assert done.returncode == 0, done.stdout
    table = pq.read_table(tmp_path / "trajectories.parquet")
    assert table.num_rows == 6 and set(table.column("reward").to_pylist()) == {1.0}
    loaded = datasets.load_dataset("parquet", data_files=str(tmp_path / "trajectories.parquet"))["train"]
    messages = json.loads(loaded[0]["messages"])
    # The gold demonstration computes the reference's last calculation with the python tool, then submits its result.
    calls = [m["tool_calls"][0]["function"]["name"] for m in messages if m["role"] == "assistant"]
    assert messages[0]["role"] == "user" and calls == ["python", "submit"]
    assert messages[2]["role"] == "tool" and float(messages[2]["content"].strip()) == float(
        messages[2]["content"]
    )  # python printed a number
    card = json.loads((tmp_path / "dataset_card.json").read_text())
    assert card["kept"] == 6 and card["reward_distribution"] == {"1.0": 6}
    assert "reward distribution" in (tmp_path / "README.md").read_text()


def test_generate_reads_its_config_whole_and_flags_given_win(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("tasks: arith\nlimit: 3\nmax_tokens: 8\nsamples: 2\n")
    done = harness(
        "generate", "--checkpoint", "gold", "--config", str(config), "--samples", "1", "--output", str(tmp_path / "d")
    )
    assert done.returncode == 0, done.stdout + done.stderr
    card = json.loads((tmp_path / "d" / "dataset_card.json").read_text())
    assert (card["config"]["tasks"], card["config"]["limit"], card["config"]["samples"]) == ("arith", 3, 1)
    assert pq.read_table(tmp_path / "d" / "trajectories.parquet").num_rows == 3

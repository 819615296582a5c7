"""`harness eval --prestart`: the same results as without, and no pre-started container left behind
when a run ends, fails mid-run or is interrupted."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from harness.evaluate import EvalConfig, evaluate
from harness.policies.scripted import EmptyPolicy, GoldPolicy
from harness.policy import Policy
from harness.eval_queue import job_specs
from tasks.grading.grade import grading_spec
from tasks.taskset import load_tasks
from tests.cli_helpers import ROOT, rows_of
from tests.sandboxes.test_prestart import our_containers, settle


class Mixed(Policy):
    """Gold on even tasks, the empty patch on odd ones: resolved and unresolved rows both."""

    name = "mixed"

    def __init__(self, tasks, stop_at: str | None = None):
        self.index = {t.id: i for i, t in enumerate(tasks)}
        self.stop_at = stop_at

    def for_task(self, task) -> Policy:
        if task.id == self.stop_at:
            raise KeyboardInterrupt  # as Ctrl-C would, in the middle of the run
        return (GoldPolicy() if self.index[task.id] % 2 == 0 else EmptyPolicy()).for_task(task)

    def generate(self, messages, tools, sampling):
        raise AssertionError("plays per task")


@pytest.fixture(scope="module")
def swe_tasks(docker_backend):
    return load_tasks("swe-demo")[:4]


def comparable(rows: list[dict]) -> list[dict]:
    return sorted(
        ({k: v for k, v in row.items() if k != "wall_s"} for row in rows), key=lambda r: (r["task_id"], r["sample"])
    )


def test_job_specs_announce_the_grading_sandbox(swe_tasks):
    task = swe_tasks[0]
    assert job_specs(task) == [task.sandbox, grading_spec(task.metadata["instance"])]


def test_results_are_the_same_with_and_without_prestart(tmp_path, docker_backend, swe_tasks):
    before = our_containers()
    rows = {}
    for prestart in (0, 2):
        config = EvalConfig(
            tasks="swe-demo",
            checkpoint="mixed",
            output=str(tmp_path / str(prestart)),
            workers=2,
            samples=2,
            prestart=prestart,
        )
        report = evaluate(swe_tasks, Mixed(swe_tasks), config, docker_backend)
        assert report["episodes"] == 8 and report["errors"] == 0
        rows[prestart] = rows_of(tmp_path / str(prestart) / "results.jsonl")
    assert comparable(rows[2]) == comparable(rows[0])
    assert {r["resolved"] for r in rows[2]} == {True, False}
    assert settle(before, 0) == {}  # a finished run leaves no pre-started container


def test_an_exception_mid_run_removes_every_prestarted_container(tmp_path, docker_backend, swe_tasks):
    before = our_containers()
    config = EvalConfig(tasks="swe-demo", checkpoint="mixed", output=str(tmp_path), workers=1, samples=2, prestart=3)
    with pytest.raises(KeyboardInterrupt):
        evaluate(swe_tasks, Mixed(swe_tasks, stop_at=swe_tasks[1].id), config, docker_backend)
    assert settle(before, 0) == {}
    assert 1 <= len(rows_of(tmp_path / "results.jsonl")) < 8


def test_ctrl_c_with_prestart_leaves_no_container(tmp_path, docker_backend):
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
        "--prestart",
        "2",
    ]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    results = tmp_path / "results.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and (not results.exists() or len(results.read_text().splitlines()) < 2):
        time.sleep(0.2)
    owned = [s for s in docker_backend.list() if s.get("harness.owner", "").endswith(f":{process.pid}")]
    process.send_signal(signal.SIGINT)
    process.wait(timeout=120)
    assert process.returncode != 0 and owned  # it was interrupted with sandboxes up
    deadline = time.monotonic() + 30  # removal finishes in the engine after the kill
    while [
        s for s in docker_backend.list() if s.get("harness.owner", "").endswith(f":{process.pid}")
    ] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [s for s in docker_backend.list() if s.get("harness.owner", "").endswith(f":{process.pid}")]
    assert 2 <= len(rows_of(results)) < 16
    assert json.loads((tmp_path / "config.json").read_text())["prestart"] == 2

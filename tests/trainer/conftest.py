"""Stage 0 of the repo-fix learning proof (arith-tool's SFT stage, about 5 minutes of CPU) starts as soon as the
session's tests are collected, at the lowest CPU priority: it runs on the cores the other tests leave idle, and the
repo-fix learning test (test_learning.py) picks it up from `swe_proof_runs`."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.cli_helpers import ROOT

PROOF_TEST = "test_grpo_and_its_control_start_from_one_plateau_and_no_hack_pays"
_stage0: dict = {}


def _start_stage0() -> None:
    runs = Path(tempfile.mkdtemp(prefix="harness-swe-proof-"))
    with open(runs / "stage0.log", "w") as log:
        _stage0["process"] = subprocess.Popen(
            ["nice", "-n", "19", "bash", str(ROOT / "scripts/learning_proof.sh"), "stage0"],
            cwd=ROOT,
            env={**os.environ, "RUNS_DIR": str(runs)},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _stage0["runs"] = runs


def pytest_collection_finish(session):
    if any(item.name == PROOF_TEST for item in session.items):
        _start_stage0()


def pytest_sessionfinish(session):
    process = _stage0.get("process")
    if process is not None and process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    if "runs" in _stage0:
        shutil.rmtree(_stage0["runs"], ignore_errors=True)


@pytest.fixture
def swe_proof_runs() -> Path:
    """The folder holding the finished stage 0, where the repo-fix proof then runs."""
    if "process" not in _stage0:  # collected without the proof test's name (e.g. a node id from elsewhere)
        _start_stage0()
    process, runs = _stage0["process"], _stage0["runs"]
    rc = process.wait(timeout=3600)
    assert rc == 0, (runs / "stage0.log").read_text()[-3000:]
    return runs

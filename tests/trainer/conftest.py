"""The repo-fix learning proof up to its plateau (arith-tool's SFT stage, the gold demonstrations, the SFT plateau and
its held-out scores: most of the test's CPU) starts as soon as the session's tests are collected, at the lowest CPU
priority: it runs on the cores the other tests leave idle, and the repo-fix learning test (test_learning.py) picks it
up from `swe_proof_runs`. The two arms, whose training times are compared, run in the test itself."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.cli_helpers import ROOT
from tests.trainer.test_learning import CI_PROOF

PROOF_TEST = "test_grpo_and_its_control_start_from_one_plateau_and_no_hack_pays"
_plateau: dict = {}


def _start_plateau() -> None:
    runs = Path(tempfile.mkdtemp(prefix="harness-swe-proof-"))
    with open(runs / "plateau.log", "w") as log:
        _plateau["process"] = subprocess.Popen(
            ["nice", "-n", "19", "bash", str(ROOT / "scripts/learning_proof.sh"), "swe", *CI_PROOF, "--until-plateau"],
            cwd=ROOT,
            env={**os.environ, "RUNS_DIR": str(runs)},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _plateau["runs"] = runs


def pytest_collection_finish(session):
    if not session.config.option.collectonly and any(item.name == PROOF_TEST for item in session.items):
        _start_plateau()


def pytest_sessionfinish(session):
    process = _plateau.get("process")
    if process is not None and process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    if "runs" in _plateau:
        shutil.rmtree(_plateau["runs"], ignore_errors=True)


@pytest.fixture
def swe_proof_runs() -> Path:
    """The folder holding the proof's finished plateau, where the arms then run."""
    if "process" not in _plateau:  # collected without the proof test's name (e.g. a node id from elsewhere)
        _start_plateau()
    process, runs = _plateau["process"], _plateau["runs"]
    rc = process.wait(timeout=3600)
    assert rc == 0, (runs / "plateau.log").read_text()[-3000:]
    return runs

"""The repo-fix learning proof, CI-sized (`learning_proof.sh swe`: arith-tool's SFT stage, the gold demonstrations, the
SFT plateau, then GRPO and its control from it, each scored on the held-out set) runs only where its test is selected
(`pytest -m proof`; the default run leaves it out, pyproject.toml). It then starts as soon as the session's tests are
collected, at the lowest CPU priority, so that it runs on the cores any other selected tests leave idle; its test
runs last and waits for it (`swe_proof_runs`)."""

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
_proof: dict = {}


def _start_proof() -> None:
    runs = Path(tempfile.mkdtemp(prefix="harness-swe-proof-"))
    with open(runs / "proof.log", "w") as log:
        _proof["process"] = subprocess.Popen(
            ["nice", "-n", "19", "bash", str(ROOT / "scripts/learning_proof.sh"), "swe", *CI_PROOF],
            cwd=ROOT,
            env={**os.environ, "RUNS_DIR": str(runs), "RAY_TMPDIR": str(runs)},  # Ray's sessions apart from the tests'
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _proof["runs"] = runs


def pytest_collection_modifyitems(session, config, items):
    """The proof's test goes last: every other test runs while the proof does."""
    items.sort(key=lambda item: item.name == PROOF_TEST)


def pytest_collection_finish(session):
    if not session.config.option.collectonly and any(item.name == PROOF_TEST for item in session.items):
        _start_proof()


def pytest_sessionfinish(session):
    process = _proof.get("process")
    if process is not None and process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    if "runs" in _proof:
        shutil.rmtree(_proof["runs"], ignore_errors=True)


@pytest.fixture
def swe_proof_runs() -> Path:
    """The folder holding the finished proof (its report, the plateau and both arms' runs)."""
    if "process" not in _proof:  # collected without the proof test's name (e.g. a node id from elsewhere)
        _start_proof()
    process, runs = _proof["process"], _proof["runs"]
    rc = process.wait(timeout=3600)
    assert rc == 0, (runs / "proof.log").read_text()[-3000:]
    return runs

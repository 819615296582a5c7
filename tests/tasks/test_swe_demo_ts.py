"""The swe-demo-ts quick-start set through `harness eval`, as a newcomer runs it: the gold policy resolves every
task and the empty one none, on Docker and on the overlay backend (the images Docker built, run under
bubblewrap). Each backend's two runs happen once, module-scoped."""

import json

import pytest

from tasks.swe_demo import BUILTIN, task_dirs
from tests.cli_helpers import eval_rows

TASKS = [p.name for p in task_dirs(BUILTIN / "swe_demo_ts")]


@pytest.fixture(scope="module", params=["docker", "overlay"])
def runs(request, tmp_path_factory):
    request.getfixturevalue(f"{request.param}_backend")  # skips where the backend is missing
    found = {}
    for checkpoint in ("gold", "empty"):
        out = tmp_path_factory.mktemp(f"{checkpoint}-{request.param}")
        rows = eval_rows("swe-demo-ts", checkpoint, request.param, out, "--workers", "4", "--force")
        found[checkpoint] = {row["task_id"]: row for row in rows}
    return found


def test_the_set_holds_typescript_tasks():
    assert 4 <= len(TASKS) <= 6
    assert {
        json.loads((BUILTIN / "swe_demo_ts" / "tasks" / t / "task.json").read_text())["language"] for t in TASKS
    } == {"typescript"}


def test_gold_resolves_every_task(runs):
    gold = runs["gold"]
    assert sorted(gold) == TASKS
    assert all(row["resolved"] and row["reward"] == 1.0 for row in gold.values()), gold


def test_empty_resolves_none(runs):
    empty = runs["empty"]
    assert sorted(empty) == TASKS
    assert not any(row["resolved"] for row in empty.values())
    assert {row["verdict"] for row in empty.values()} == {"empty_patch"}

"""Tasks Harbor's own CLI writes (`harbor tasks init`, every template it offers, filled in), and our swe-demo
exported to Harbor (`harness tasks export --format harbor`) and loaded back: each built offline here, the oracle
resolves it and nothing does not, on Docker and overlay."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks.exporters import export_tasks
from tasks.taskset import load_tasks
from tests.cli_helpers import harness, rows_of
from tests.tasks.harbor_init import TEMPLATES, harbor_init


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, docker_backend) -> Path:
    root = tmp_path_factory.mktemp("harbor-roundtrip")
    (root / "init").mkdir()
    harbor_init(root / "init")
    export_tasks(load_tasks("swe-demo")[:2], "harbor", root / "export")
    return root


@pytest.mark.parametrize("backend", ["docker", "overlay"])
def test_harbor_init_and_the_export_round_trip(dataset, tmp_path, backend, request):
    request.getfixturevalue(f"{backend}_backend")
    for policy, reward in (("gold", 1.0), ("empty", 0.0)):
        out = tmp_path / policy
        done = harness(
            "eval", "--checkpoint", policy, "--tasks", f"harbor:{dataset}", "--backend", backend,
            "--output", str(out), "--workers", "2",
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        rows = {row["task_id"]: row for row in rows_of(out / "results.jsonl")}
        assert sorted(rows) == sorted([*TEMPLATES, "cachekeep__cachekeep-1", "cachekeep__cachekeep-2"])
        for task, row in rows.items():
            assert (row["reward"], row["error"]) == (reward, ""), (policy, task, row)


def test_a_separate_verifier_gets_its_own_image_and_the_artifacts(dataset):
    tasks = {task.id: task for task in load_tasks(f"harbor:{dataset / 'init'}")}
    separate, shared = tasks["pytest-separate"], tasks["pytest-shared"]
    assert shared.metadata.get("verifier_sandbox") is None
    verifier = separate.metadata["verifier_sandbox"]
    assert verifier["image"].startswith("harness-harbor/pytest-separate-verifier:")
    assert verifier["image"] != separate.sandbox.image and verifier["workdir"] == "/app"
    assert separate.metadata["artifacts"] == ["/app/hello.txt"]

"""swe-demo and swe-tiny exported as Harbor task directories, checked by Harbor itself: its TaskConfig reads every
task.toml, and the real `harbor run` (docker environment) scores the gold patch 1 and no change 0."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from bench.harbor_bench import harbor_run
from harness.scaffolds.venvs import HARBOR, venv_python
from tasks.exporters import export_tasks
from tasks.grading.grade import decide, judge_log
from tasks.taskset import load_tasks
from tests.cli_helpers import harness

# Two of swe-demo's 16 tasks and one of swe-tiny's (its repository is made by a setup script, baked into an image
# by the export): two Harbor jobs (oracle, nop) of three trials each, run at once.


@pytest.fixture(scope="module")
def exported(tmp_path_factory, docker_backend):
    tasks = load_tasks("swe-demo")[:2] + load_tasks("swe-tiny")[:1]
    out = tmp_path_factory.mktemp("harbor-tasks")
    return tasks, export_tasks(tasks, "harbor", out)


def harbor_python(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(venv_python(HARBOR)), "-c", script, *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_export_writes_task_directories_harbor_reads(exported):
    tasks, folders = exported
    assert [f.name for f in folders] == [t.id for t in tasks]
    for folder in folders:
        for name in ("task.toml", "instruction.md", "environment/Dockerfile", "tests/test.sh", "solution/solve.sh"):
            assert (folder / name).is_file(), f"{folder.name} lacks {name}"
    script = """
import json, sys
from pathlib import Path
from harbor.models.task.config import TaskConfig
from harbor.models.task.task import Task
out = {}
for folder in map(Path, sys.argv[1:]):
    config = TaskConfig.model_validate_toml((folder / "task.toml").read_text())
    Task(folder)  # Harbor's own loader: the directory layout it expects
    out[folder.name] = config.model_dump(mode="json")
print(json.dumps(out))
"""
    done = harbor_python(script, *map(str, folders))
    assert done.returncode == 0, done.stderr[-3000:]
    configs = json.loads(done.stdout.strip().splitlines()[-1])
    for task in tasks:
        config = configs[task.id]
        instance = task.metadata["instance"]
        folder = folders[tasks.index(task)]
        assert "network_mode: none" in (folder / "environment/docker-compose.yaml").read_text()
        assert config["environment"]["workdir"] == instance["workdir"]
        assert config["environment"]["memory_mb"] == 2048
        assert config["agent"]["timeout_sec"] == task.sandbox.wall_time
        assert config["metadata"]["base_commit"] == instance["base_commit"]
        dockerfile = (folder / "environment/Dockerfile").read_text()
        baked = "setup_script" in instance  # its image: the instance's with the setup script run
        assert dockerfile.startswith("FROM harness-export/" if baked else f"FROM {instance['image']}\n")


def test_export_refuses_tasks_it_cannot_grade(tmp_path):
    done = harness("tasks", "export", str(tmp_path / "out"), "--tasks", "arith", "--limit", "1")
    assert done.returncode == 1 and "not a repo-fix task" in done.stdout
    done = harness("tasks", "export", str(tmp_path / "out"), "--format", "nonesuch")
    assert done.returncode == 1 and "unknown task export format 'nonesuch'" in done.stdout


@pytest.mark.slow
def test_harbor_runs_the_export_oracle_1_nop_0(exported, tmp_path):
    tasks, folders = exported
    dataset = folders[0].parent
    with ThreadPoolExecutor(2) as pool:  # the two jobs at once
        oracle, nop = pool.map(
            lambda agent: harbor_run(dataset, agent, tmp_path / "jobs", workers=3), ("oracle", "nop")
        )
    assert oracle == {t.id: 1.0 for t in tasks}
    assert nop == {t.id: 0.0 for t in tasks}
    # The verdict in the container is the one our own grading gives the same log.
    for agent, resolved in (("oracle", True), ("nop", False)):
        for task in tasks:
            (trial,) = (tmp_path / "jobs" / agent).glob(f"{task.id}__*/verifier/test_output.log")
            config = json.loads((folders[tasks.index(task)] / "tests/config.json").read_text())
            instance = task.metadata["instance"]
            judged = judge_log(instance, trial.read_text(), config["canary"])
            assert judged.problem == ""
            assert (decide(instance, judged.statuses)[1] == "FULL") is resolved

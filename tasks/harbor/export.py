"""Repo-fix tasks written as Harbor task directories, which the `harbor` CLI runs as they are.

One directory per SWE-bench instance:

    task.toml                 timeouts, resources, the work directory, the instance's identity
    instruction.md            the issue, posed as our own prompt poses it (without our `submit` tool)
    environment/Dockerfile    FROM the instance's image (built locally), WORKDIR its work directory
    environment/docker-compose.yaml   the container on no network (`network_mode: none`)
    tests/test.sh             runs the instance's eval script (test files reset, test patch applied, a
                              canary planted) into /logs/verifier/test_output.log, then tests/grade.py
                              (`tasks.harbor.sandbox_grade`) writes /logs/verifier/reward.txt
    solution/solve.sh         applies solution/gold.patch

Harbor copies tests/ into the container only after the agent has finished, so the canary's name
and the test lists stay unseen. An instance whose sandboxes need work at start (a `setup_script`,
or a repository put in from an archive: `tasks.shared_env`) gets an image with that work baked in
(`harness-export/<id>`), built here offline; the Dockerfile names that image.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import tempfile
from pathlib import Path
from typing import Any

from infra.rundir import safe_name
from sandboxes.images import build_image, image_exists
from sandboxes.spec import parse_bytes

from ..errors import TaskError
from ..grading.grade import eval_script, new_canary
from ..grading.patch_policy import test_list
from ..shared_env import REPO_ARCHIVE
from ..swe import WORKDIR
from ..task import Task

GRADER = Path(__file__).with_name("sandbox_grade.py")
# The log parsers whose output sandbox_grade.py reads: pytest's `-rA` result lines.
PYTEST_PARSERS = ("parse_log_pytest", "parse_log_pytest_options", "parse_log_pytest_v2")
VERIFIER_TIMEOUT_S = 900.0  # as `tasks.grading.grade.grade`'s default
BUILD_TIMEOUT_S = 600.0
INSTRUCTION = """A Python repository is checked out at {workdir} (at commit {base_commit}). Consider this issue:

<issue>
{problem_statement}
</issue>

Change the non-test source files in {workdir} so that the behaviour the issue asks for holds.
Do not modify the tests or the test configuration: the tests that judge the change are the
repository's own, put back as they were.
"""
TEST_SH = """#!/bin/bash
# The instance's eval script, detached from any terminal (so the code under test cannot write around
# the log), then the grader: reward 1 when every FAIL_TO_PASS and PASS_TO_PASS test passes.
mkdir -p /logs/verifier
setsid --wait bash /tests/eval.sh > /logs/verifier/test_output.log 2>&1 < /dev/null
for python in python3 python; do
  if command -v "$python" >/dev/null; then
    exec "$python" /tests/grade.py /tests/config.json /logs/verifier/test_output.log /logs/verifier
  fi
done
echo "no Python in the image to grade with" >&2
echo 0 > /logs/verifier/reward.txt
"""
# Off every network, as our sandboxes are. Harbor's own `network_mode = "no-network"` needs its egress-control
# sidecar, an image it builds from a public base with packages from the network; this compose file, which Harbor
# merges into its own, keeps the task's container on no network at all instead.
NO_NETWORK_COMPOSE = """services:
  main:
    network_mode: none
"""
SOLVE_SH = """#!/bin/bash
set -euo pipefail
cd {workdir}
git apply --verbose /solution/gold.patch
"""


def export_harbor(tasks: list[Task], out: Path) -> list[Path]:
    """Write every task of `tasks` under `out` as a Harbor task directory; returns them in order."""
    instances = []
    for task in tasks:
        instance = task.metadata.get("instance")
        if not isinstance(instance, dict):
            raise TaskError(
                f"task {task.id} ({task.env_class}) is not a repo-fix task: Harbor export takes SWE-bench instances"
            )
        parser = instance.get("log_parser") or "parse_log_pytest"
        if parser not in PYTEST_PARSERS:
            raise TaskError(
                f"{task.id}: its tests' log ({parser}) cannot be graded inside a Harbor container yet; "
                f"exported tasks need one of {', '.join(PYTEST_PARSERS)}"
            )
        instances.append((task, instance))
    out.mkdir(parents=True, exist_ok=True)
    return [_write_task(task, instance, out / safe_name(task.id)) for task, instance in instances]


def _write_task(task: Task, instance: dict[str, Any], folder: Path) -> Path:
    workdir = instance.get("workdir") or WORKDIR
    canary = new_canary()
    files = {
        "task.toml": task_toml(task, instance),
        "instruction.md": INSTRUCTION.format(
            workdir=workdir, base_commit=instance["base_commit"], problem_statement=instance["problem_statement"]
        ),
        "environment/Dockerfile": f"FROM {environment_image(instance)}\nWORKDIR {workdir}\n",
        "environment/docker-compose.yaml": NO_NETWORK_COMPOSE,
        "tests/test.sh": TEST_SH,
        "tests/eval.sh": eval_script(instance, canary),
        "tests/grade.py": GRADER.read_text(),
        "tests/config.json": json.dumps(
            {
                "instance_id": instance["instance_id"],
                "FAIL_TO_PASS": test_list(instance.get("FAIL_TO_PASS")),
                "PASS_TO_PASS": test_list(instance.get("PASS_TO_PASS")),
                "canary": canary,
            },
            indent=1,
        ),
        "solution/solve.sh": SOLVE_SH.format(workdir=shlex.quote(workdir)),
        "solution/gold.patch": instance.get("patch") or "",
    }
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if name.endswith(".sh"):
            path.chmod(0o755)
    return folder


def task_toml(task: Task, instance: dict[str, Any]) -> str:
    spec = task.sandbox
    sections: dict[str, dict[str, Any]] = {
        "metadata": {
            "harness_task_id": task.id,
            "repo": instance["repo"],
            "base_commit": instance["base_commit"],
            "source_image": instance["image"],
        },
        "verifier": {"timeout_sec": VERIFIER_TIMEOUT_S},
        "agent": {"timeout_sec": float(spec.wall_time) if spec else 3600.0},
        "environment": {
            "build_timeout_sec": BUILD_TIMEOUT_S,
            "cpus": spec.cpus if spec else 1.0,
            "memory_mb": parse_bytes(spec.memory) >> 20 if spec else 2048,
            "workdir": instance.get("workdir") or WORKDIR,
        },
    }
    lines = ['schema_version = "1.4"']
    for name, values in sections.items():
        lines += ["", f"[{name}]"] + [f"{key} = {_toml_value(value)}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    raise TaskError(f"cannot write {value!r} into task.toml")


def environment_image(instance: dict[str, Any]) -> str:
    """The image the task's container starts from: the instance's own, or one with its start-time work baked in."""
    setup, archive = instance.get("setup_script") or "", instance.get(REPO_ARCHIVE) or ""
    if not setup and not archive:
        return instance["image"]
    workdir = instance.get("workdir") or WORKDIR
    digest = hashlib.sha256(f"{instance['image']}\0{setup}\0{archive}".encode())
    if archive:
        digest.update(Path(archive).read_bytes())
    tag = f"harness-export/{safe_name(instance['instance_id']).lower()}:{digest.hexdigest()[:12]}"
    if image_exists(tag):
        return tag
    steps, context = [f"FROM {instance['image']}"], {}
    if archive:  # as tasks.shared_env.inject_repo: the commit's tree over the environment's, then only its files
        context["repo.tar"] = Path(archive)
        steps += [
            "COPY repo.tar /tmp/harness_repo.tar",
            f"RUN mkdir -p {workdir} && tar -xf /tmp/harness_repo.tar -C {workdir} && rm /tmp/harness_repo.tar"
            f" && cd {workdir} && git clean -fdq",
        ]
    if setup:
        steps += ["COPY setup.sh /tmp/harness_setup.sh", "RUN bash /tmp/harness_setup.sh && rm /tmp/harness_setup.sh"]
    with tempfile.TemporaryDirectory(prefix="harness-harbor-") as scratch:
        if setup:
            context["setup.sh"] = Path(scratch) / "setup.sh"
            context["setup.sh"].write_text(setup)
        dockerfile = "\n".join([*steps, f"WORKDIR {workdir}"]) + "\n"
        build_image(tag, dockerfile, context, labels={"harness.task": instance["instance_id"]})
    return tag

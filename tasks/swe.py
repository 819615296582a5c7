"""Repo-fix tasks in SWE-bench format: instances, their images and their eval scripts."""

from __future__ import annotations

import json
from typing import Any

from sandboxes.spec import SandboxSpec

from .errors import TaskError
from .patch_policy import parse_patch
from .task import Task
from .taskset import SWE_REQUIRED_FIELDS

WORKDIR = "/testbed"
SWE_TOOLS = ["bash", "str_replace_editor", "submit"]
TEST_COMMAND = "python3 -m pytest -rA -p no:cacheprovider --tb=short -o console_output_style=classic"
_HEREDOC = "EOF_HARNESS_7f3c1e"
PROMPT = """<uploaded_files>
{workdir}
</uploaded_files>
A Python repository is checked out at {workdir} (at commit {base_commit}). Consider this issue:

<issue>
{problem_statement}
</issue>

Change the non-test source files in {workdir} so that the behaviour the issue asks for holds.
Do not modify the tests or the test configuration: such changes are discarded and void the
attempt. Explore the code, reproduce the problem, fix it, check your fix, then call `submit`."""


def official_image(instance_id: str, arch: str = "x86_64") -> str:
    """The image name SWE-bench publishes for an instance (for users with a registry)."""
    return f"swebench/sweb.eval.{arch}.{instance_id.replace('__', '_1776_').lower()}:latest"


def test_list(value: Any) -> list[str]:
    return json.loads(value) if isinstance(value, str) else list(value or [])


def instance_to_task(instance: dict[str, Any], max_turns: int = 30) -> Task:
    """A SWE-bench instance (v5 fields) as a Task for the agent loop."""
    missing = [name for name in SWE_REQUIRED_FIELDS if not instance.get(name) and name not in ("patch", "test_patch")]
    if missing:
        raise TaskError(f"SWE-bench instance {instance.get('instance_id', '?')} lacks {', '.join(missing)}")
    instance = dict(instance)
    instance.setdefault("image", official_image(instance["instance_id"]))
    workdir = instance.get("workdir", WORKDIR)
    prompt = PROMPT.format(workdir=workdir, base_commit=instance["base_commit"], problem_statement=instance["problem_statement"])
    return Task(
        id=instance["instance_id"],
        data_source=instance["repo"],
        prompt=[{"role": "user", "content": prompt}],
        env_class="swe",
        reward_spec={"method": "swebench", "ground_truth": instance["instance_id"]},
        sandbox=SandboxSpec(image=instance["image"], workdir=workdir, memory="2g", pids=512, wall_time=3600),
        tools=list(SWE_TOOLS),
        max_turns=max_turns,
        metadata={"instance": instance},
    )


def make_eval_script(base_commit: str, test_patch: str, test_command: str = TEST_COMMAND, workdir: str = WORKDIR) -> str:
    """An eval script shaped like SWE-bench's: reset the test files, apply the test patch, run.

    Every file the test patch touches is restored to the base commit (or deleted, if the test
    patch creates it) before the test patch is applied, so the model's copy never counts.
    """
    touched = parse_patch(test_patch)
    existing = " ".join(f.path for f in touched if not f.is_new)
    created = " ".join(f.path for f in touched if f.is_new)
    lines = ["#!/bin/bash", "set -uxo pipefail", f"cd {workdir}"]
    if existing:
        lines.append(f"git checkout {base_commit} -- {existing}")
    if created:
        lines.append(f"rm -rf {created}")
    if test_patch.strip():
        lines += [f"git apply -v - <<'{_HEREDOC}'", test_patch.rstrip("\n"), _HEREDOC]
    lines += [": '>>>>> Start Test Output'", test_command, ": '>>>>> End Test Output'"]
    if existing:
        lines.append(f"git checkout {base_commit} -- {existing}")
    return "\n".join(lines) + "\n"

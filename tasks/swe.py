"""Repo-fix tasks in SWE-bench format: instances, their images and their eval scripts."""

from __future__ import annotations

from typing import Any

from sandboxes.spec import SandboxSpec

from .errors import TaskError
from .grading.patch_policy import parse_patch, test_list
from .languages import language_of
from .task import Task

SWE_REQUIRED_FIELDS = (
    "instance_id",
    "repo",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
)  # of a SWE-bench instance
WORKDIR = "/testbed"
SWE_TOOLS = ["bash", "str_replace_editor", "submit"]
TEST_COMMAND = "python3 -m pytest -rA -p no:cacheprovider --tb=short -o console_output_style=classic"
_HEREDOC = "EOF_HARNESS_7f3c1e"
PROMPT = """<uploaded_files>
{workdir}
</uploaded_files>
A {language} repository is checked out at {workdir} (at commit {base_commit}). Consider this issue:

<issue>
{problem_statement}
</issue>

Change the non-test source files in {workdir} so that the behaviour the issue asks for holds.
Do not modify the tests or the test configuration: such changes are discarded and void the
attempt. Explore the code, reproduce the problem, fix it, check your fix, then call `submit`."""


def official_image(instance_id: str, arch: str = "x86_64") -> str:
    """The image name SWE-bench publishes for an instance (for users with a registry)."""
    return f"swebench/sweb.eval.{arch}.{instance_id.replace('__', '_1776_').lower()}:latest"


def grading_problems(instance: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, problem) for everything grading needs of an instance: an eval script, a log parser
    the `swebench` package knows, a known eval type, and a non-empty FAIL_TO_PASS (without one,
    an empty patch would count as resolved)."""
    from swebench.harness.constants import EvalType
    from swebench.harness.log_parsers import PARSER_REGISTRY

    problems = []
    script = instance.get("eval_script")
    if not isinstance(script, str) or not script.strip():
        problems.append(
            (
                "eval_script",
                "is required for grading: the shell script that runs the tests"
                if script is None
                else f"must be a non-empty string, got {type(script).__name__}",
            )
        )
    parser = instance.get("log_parser")
    if parser is not None and parser not in PARSER_REGISTRY:
        problems.append(
            (
                "log_parser",
                f"unknown log parser {parser!r}; known: {', '.join(sorted(map(str, PARSER_REGISTRY))[:8])}, ...",
            )
        )
    eval_type = instance.get("eval_type")
    if eval_type is not None and eval_type not in {e.value for e in EvalType}:
        problems.append(("eval_type", f"must be one of {', '.join(e.value for e in EvalType)}, got {eval_type!r}"))
    for field in ("image", "workdir", "version"):
        if instance.get(field) is not None and not isinstance(instance[field], (str, int, float)):
            problems.append((field, f"must be a string, got {type(instance[field]).__name__}"))
    for field, may_be_empty in (("FAIL_TO_PASS", False), ("PASS_TO_PASS", True)):
        try:
            tests = test_list(instance.get(field))
        except (ValueError, TypeError):
            problems.append((field, "must be a list of test names or a JSON string of one"))
            continue
        if not all(isinstance(t, str) for t in tests):
            problems.append((field, "must be a list of test names (strings)"))
        elif not tests and not may_be_empty:
            problems.append(
                (field, "must name at least one test: with none, any patch (even an empty one) would count as resolved")
            )
    return problems


def instance_to_task(instance: dict[str, Any], max_turns: int = 30) -> Task:
    """A SWE-bench instance (v5 fields) as a Task for the agent loop."""
    missing = [name for name in SWE_REQUIRED_FIELDS if not instance.get(name) and name not in ("patch", "test_patch")]
    if missing:
        raise TaskError(f"SWE-bench instance {instance.get('instance_id', '?')} lacks {', '.join(missing)}")
    instance = dict(instance)
    instance.setdefault("image", official_image(instance["instance_id"]))
    workdir = instance.get("workdir", WORKDIR)
    prompt = PROMPT.format(
        language=language_of(instance).title,
        workdir=workdir,
        base_commit=instance["base_commit"],
        problem_statement=instance["problem_statement"],
    )
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


def make_eval_script(
    base_commit: str, test_patch: str, test_command: str = TEST_COMMAND, workdir: str = WORKDIR
) -> str:
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

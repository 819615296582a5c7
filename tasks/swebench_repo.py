"""SWE-bench 5 task repositories, read into our Tasks and written back.

A task repository (`swebench.task.repo`) is `sweb.yaml` (the datasets it publishes and their splits)
and one directory per instance, `tasks/<instance_id>/`: `task.yaml`, `tests.json`,
`problem_statement.md`, `hints.md`, `gold.patch`, `test.patch`, `eval.sh`, a `Dockerfile` and
`test_assets/` (binary files the patches cannot carry, staged at grading time as `run_evaluation`
stages them; `problem_assets/` is never read).

Reading takes `swebench-repo:PATH[:SPLIT]`, or a folder holding `sweb.yaml` (`PATH[:SPLIT]`); the
split is `test` unless named. Each task directory is read by `swebench.task.repo.load_task`; one that
is broken (a required file missing, `tests.json` not JSON or naming no FAIL_TO_PASS test, a patch that
is not a diff) is reported by task and file and skipped, and the others load. Each task runs in the
image its `task.yaml` names; one not present locally is built from the task's `Dockerfile`
(`tasks.swebench_image`: offline, public base images stood in for, each substitution recorded), and one
that cannot be built is reported with the reason.

Writing gives every instance the image name `swebench.task.checks` derives from its id, tagged here on
the image our build made (with any work our sandboxes do at start baked in), so SWE-bench's own CLI
evaluates it on our images; its `Dockerfile` rebuilds that environment from public parts
(`tasks.swebench_image.rebuild_files`).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

import yaml

from sandboxes.images import build_image, image_exists

from .errors import TaskError, TaskSourceError
from .grading.patch_policy import parse_patch, test_list
from .harbor.export import environment_image
from .shared_env import REPO_ARCHIVE
from .swe import WORKDIR, grading_problems, instance_to_task
from .swebench_image import build_from_dockerfile, rebuild_files
from .task import Task

log = logging.getLogger(__name__)
PREFIX = "swebench-repo:"
DEFAULT_SPLIT = "test"
TASK_DIR = "task_dir"  # Task.metadata: the directory a task was read from
ASSETS_KEY = "test_assets_dir"  # the local test_assets/ folder of an instance read from a task repository
DEFAULTS = {"version": "0", "log_parser": "parse_log_pytest", "eval_type": "pass_and_fail"}
IMAGE_BUILT = "image_built_from"  # Task.metadata: the substitutions made building a task's image from its Dockerfile


# ----------------------------------------------------------------------------- reading


def repo_source(source: str) -> tuple[Path, str | None] | None:
    """(repository, split or None) when `source` names a task repository, else None."""
    explicit = source.startswith(PREFIX)
    rest = source.removeprefix(PREFIX)
    head, _, split = rest.rpartition(":")
    for path, named in ((rest, None), (head, split)):
        if path and _is_task_repo(Path(path).expanduser()):  # `swebench-repo:~/x`: no shell expands that `~`
            return Path(path).expanduser(), named or None
    if explicit:
        raise TaskSourceError(f"{rest!r} is not a SWE-bench task repository: it has no sweb.yaml")
    return None


def _is_task_repo(path: Path) -> bool:
    from swebench.task.repo import CONFIG_FILE

    return (path / CONFIG_FILE).is_file()


def load_repo_tasks(repo: Path, split: str | None = None) -> list[Task]:
    """The tasks of `split` (default `test`) in task repository `repo`; broken task directories are reported
    and skipped, and an error is raised only when none loads."""
    from swebench.task.repo import load_config, tasks_root

    try:
        splits = load_config(repo)["splits"]
        root = tasks_root(repo)
    except (FileNotFoundError, ValueError, yaml.YAMLError) as exc:
        raise TaskSourceError(f"{repo}: not a readable task repository: {exc}") from exc
    split = split or DEFAULT_SPLIT
    if split not in splits:
        raise TaskSourceError(f"{repo}: unknown split {split!r}; sweb.yaml publishes {', '.join(map(str, splits))}")
    tasks, problems = [], []
    for task_dir in sorted(d for d in root.iterdir() if d.is_dir()):
        try:
            instance = read_task(task_dir)
            if instance.pop("split", None) != split:
                continue
            task = instance_to_task(instance)
        except TaskError as exc:
            problems.append(str(exc))
            continue
        task.metadata[TASK_DIR] = str(task_dir.resolve())  # its Dockerfile, for writing the task out again
        tasks.append(task)
    for problem in problems:
        log.warning("skipped %s", problem)
    if not tasks:
        found = "".join(f"\n  {p}" for p in problems)
        raise TaskSourceError(f"{repo}: no task of split {split!r} could be read{found}")
    for task in tasks:
        problem = ensure_image(task, root / task.id)
        if problem:
            log.warning("%s", problem)
    return tasks


def read_task(task_dir: Path) -> dict[str, Any]:
    """One task directory as a SWE-bench instance (`swebench.task.repo.load_task`), checked first: a TaskError
    names the task and the file at fault."""
    from swebench.task.checks import REQUIRED_FILES
    from swebench.task.repo import ASSETS_SUBDIR, TASK_FILE, TESTS_FILE, load_task

    where = f"tasks/{task_dir.name}"
    missing = [name for name in REQUIRED_FILES if not (task_dir / name).is_file()]
    if missing:
        raise TaskError(f"{where}: missing {', '.join(missing)}")
    try:
        tests = json.loads((task_dir / TESTS_FILE).read_text())
    except ValueError as exc:
        raise TaskError(f"{where}/{TESTS_FILE}: not valid JSON: {exc}") from None
    if not isinstance(tests, dict) or not _names_tests(tests.get("FAIL_TO_PASS")):
        raise TaskError(f"{where}/{TESTS_FILE}: names no FAIL_TO_PASS test, so nothing would grade the task")
    if not _is_test_list(tests.get("PASS_TO_PASS", [])):
        raise TaskError(f"{where}/{TESTS_FILE}: PASS_TO_PASS must be a list of test names")
    try:
        instance = load_task(task_dir)
    except yaml.YAMLError as exc:
        raise TaskError(f"{where}/{TASK_FILE}: not valid YAML: {exc}") from None
    except TypeError as exc:  # a task.yaml that is not a mapping
        raise TaskError(f"{where}/{TASK_FILE}: not a mapping of the instance's fields: {exc}") from None
    except ValueError as exc:  # a file that is not UTF-8 text
        raise TaskError(f"{where}: a file cannot be read as text: {exc}") from None
    if instance.get("instance_id") != task_dir.name:
        raise TaskError(f"{where}/{TASK_FILE}: its instance_id must be the directory's name, {task_dir.name!r}")
    for name, field in (("gold.patch", "patch"), ("test.patch", "test_patch")):
        if instance[field].strip() and not parse_patch(instance[field]):
            raise TaskError(f"{where}/{name}: not a diff")
    for field, message in grading_problems(instance):
        raise TaskError(f"{where}/{TASK_FILE}: {field} {message}")
    instance.pop("datasets", None)  # how the task is published, not part of the instance
    if (task_dir / ASSETS_SUBDIR).is_dir():
        instance[ASSETS_KEY] = str((task_dir / ASSETS_SUBDIR).resolve())
    return instance


def repo_problems(repo: Path) -> list[str]:
    """Every error in a task repository: swebench's own checks (`swebench dataset check`), then what reading
    finds in the task directories those pass (an empty list: every task loads)."""
    from swebench.task.checks import check_task_repo, errors
    from swebench.task.repo import tasks_root

    found = errors(check_task_repo(repo))
    problems, flagged = [str(problem) for problem in found], {problem.where for problem in found}
    try:
        task_dirs = sorted(d for d in tasks_root(repo).iterdir() if d.is_dir() and f"tasks/{d.name}" not in flagged)
    except FileNotFoundError:
        return problems
    for task_dir in task_dirs:
        try:
            read_task(task_dir)
        except TaskError as exc:
            problems.append(f"error: {exc}")
    return problems


def _is_test_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(t, str) for t in value)


def _names_tests(value: Any) -> bool:
    return _is_test_list(value) and bool(value)


def ensure_image(task: Task, task_dir: Path) -> str:
    """Why the task's image cannot run here ("" when it is present, or was just built from the task's Dockerfile;
    the substitutions that build made are in the task's metadata and the log)."""
    image = task.metadata["instance"]["image"]
    if image_exists(image):
        return ""
    try:
        substituted = build_from_dockerfile(task_dir, image)
    except TaskError as err:
        return f"tasks/{task_dir.name}: its image {image} is not present locally, so its sandboxes cannot start: {err}"
    task.metadata[IMAGE_BUILT] = substituted
    log.info("tasks/%s: built %s from its Dockerfile; %s", task_dir.name, image, "; ".join(substituted) or "as written")
    return ""


# ----------------------------------------------------------------------------- writing


def export_swebench_repo(tasks: list[Task], out: Path) -> list[Path]:
    """Write `tasks` under `out` as a task repository that `swebench dataset check` accepts (one dataset named
    after `out`, split `test`); returns the task directories in order."""
    from swebench.task.checks import check_task_repo, errors
    from swebench.task.repo import CONFIG_FILE, dump_yaml

    instances = [(_instance_of(task), task.metadata.get(TASK_DIR)) for task in tasks]
    dataset = out.resolve().name
    out.mkdir(parents=True, exist_ok=True)
    (out / CONFIG_FILE).write_text(dump_yaml({"datasets": [dataset], "splits": [DEFAULT_SPLIT]}))
    written = [
        _write_task(instance, read_from, out / "tasks" / instance["instance_id"], dataset)
        for instance, read_from in instances
    ]
    problems = errors(check_task_repo(out))
    if problems:
        raise TaskError(f"{out}: swebench's checks refuse the export: " + "; ".join(map(str, problems)))
    return written


def _instance_of(task: Task) -> dict[str, Any]:
    instance = task.metadata.get("instance")
    if not isinstance(instance, dict):
        raise TaskError(
            f"task {task.id} ({task.env_class}) is not a repo-fix task: a task repository holds SWE-bench instances"
        )
    if not isinstance(instance.get("eval_script"), str) or not instance["eval_script"].strip():
        raise TaskError(f"task {task.id} has no eval_script, which a task repository's eval.sh must hold")
    name = instance["instance_id"]
    if name in (".", "..") or "/" in name or "\\" in name:
        raise TaskError(f"task id {name!r} cannot name a task directory")
    return instance


def _write_task(instance: dict[str, Any], read_from: str | None, folder: Path, dataset: str) -> Path:
    """One task directory; a task read from a task repository keeps the Dockerfile it had there."""
    from swebench.task.checks import expected_image
    from swebench.task.repo import AS_FILE, ASSETS_SUBDIR, OPTIONAL_FILE, TASK_FILE, TESTS_FILE, dump_tests, dump_yaml

    instance_id = instance["instance_id"]
    image = expected_image(instance_id)
    workdir = instance.get("workdir") or WORKDIR
    as_files = {**AS_FILE, **OPTIONAL_FILE}
    if read_from:  # the Dockerfile it had, with what it copies from its directory
        source_image = image
        written = {TASK_FILE, TESTS_FILE, *as_files.values()}
        context = {p.name: p.read_bytes() for p in Path(read_from).iterdir() if p.is_file() and p.name not in written}
    else:  # our image, with the start-time work (setup script, repository archive) baked in
        source_image = environment_image(instance)
        context = rebuild_files(instance, source_image, workdir)
    dropped = {*as_files, "FAIL_TO_PASS", "PASS_TO_PASS", "setup_script", REPO_ARCHIVE, ASSETS_KEY}
    meta = {key: value for key, value in instance.items() if key not in dropped}
    meta = {**DEFAULTS, **meta, "image": image, "split": DEFAULT_SPLIT, "datasets": [dataset]}
    folder.mkdir(parents=True, exist_ok=True)
    texts = {
        TASK_FILE: dump_yaml(meta),
        TESTS_FILE: dump_tests({key: test_list(instance.get(key)) for key in ("FAIL_TO_PASS", "PASS_TO_PASS")}),
    }
    texts.update({name: instance.get(field) or "" for field, name in as_files.items()})
    for name, text in texts.items():
        if name in OPTIONAL_FILE.values() and not text:
            continue
        with open(folder / name, "w", newline="") as fh:  # newline="": a patch's CRLF stays as it is
            fh.write(text)
    for name, data in context.items():
        (folder / name).write_bytes(data)
    if instance.get(ASSETS_KEY):
        shutil.copytree(instance[ASSETS_KEY], folder / ASSETS_SUBDIR, dirs_exist_ok=True)
    if image != source_image:  # the derived name, on our image, so that SWE-bench's CLI finds it without a registry
        if image_exists(source_image):
            build_image(image, f"FROM {source_image}\nWORKDIR {workdir}\n", {}, labels={"harness.task": instance_id})
        else:
            log.warning("%s: %s is not present locally, so %s was not built", instance_id, source_image, image)
    return folder

"""The built-in quick-start task sets (`swe-demo`, one per language): SWE-bench instances made from the
packages in builtin/<set>/.

Each task folder holds a `task.json` (its `language`, a name `tasks.languages` knows: python where none is
given),  a problem statement, a patch that plants the bug and a test patch.
From them we build, once and cached by content hash: a git repository at the buggy base
commit (no history that reveals the fix), the gold patch (the bug patch reversed), the eval
script, an image on the base image with the repository at /testbed, and FAIL_TO_PASS /
PASS_TO_PASS computed by running the tests without and with the gold patch.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Callable

from sandboxes import Backend, ImageNotFound, get_backend
from sandboxes.cache_lock import cache_lock
from sandboxes.images import BASE_REPOSITORY, build_base_image, build_image, cache_dir, image_exists, recipe_hash

from .errors import TaskError
from .grading.grade import parse_log, run_eval
from .languages import language_named, language_of
from .repos import make_bugged_repo
from infra.runlog import atomic_write
from .shared_env import repo_archive, share
from .swe import WORKDIR, make_eval_script

log = logging.getLogger(__name__)
BUILTIN = Path(__file__).parent / "builtin"
CONTENT = BUILTIN / "swe_demo"
# Quick-start set name -> its folder under builtin/ (tasks.taskset registers each).
QUICK_START_SETS = {
    "swe-demo": "swe_demo",
    "swe-demo-go": "swe_demo_go",
    "swe-demo-rust": "swe_demo_rust",
    # TypeScript on Debian's tsc and Node's built-in test runner: no npm package, offline (its README).
    "swe-demo-ts": "swe_demo_ts",
}


def task_dirs(content: Path = CONTENT) -> list[Path]:
    return sorted(p for p in (content / "tasks").iterdir() if (p / "task.json").exists())


def load_swe_demo(
    backend: Backend | None = None,
    on_step: Callable[[str], None] = log.info,
    shared: bool = False,
    content: Path = CONTENT,
) -> list[dict[str, Any]]:
    """Every instance of the quick-start set in `content`, with its image built and its test lists computed.

    With `shared`, no instance image: each runs from its language's base image with its repository put in
    at start (`tasks.shared_env`). `backend` computes the test lists of an instance not yet cached
    (default: Docker, made only then)."""
    return [build_instance(path, backend, on_step, shared) for path in task_dirs(content)]


def build_instance(
    task_dir: Path, backend: Backend | None, on_step: Callable[[str], None] = log.info, shared: bool = False
) -> dict[str, Any]:
    meta = json.loads((task_dir / "task.json").read_text())
    package_dir = task_dir.parent.parent / "packages" / meta["package"]
    digest = _content_hash(task_dir, package_dir, language_named(meta.get("language", "python")))
    work = cache_dir() / "swe-demo" / f"{meta['instance_id']}-{digest}"
    cached = work / "instance.json"
    with cache_lock(work):  # a second process building this instance waits, then reads it
        if not cached.exists():
            _build_instance(meta, task_dir, package_dir, digest, work, backend, on_step, shared)
    return _runnable(json.loads(cached.read_text()), work / "repo", shared, on_step)


def _build_instance(
    meta: dict[str, Any],
    task_dir: Path,
    package_dir: Path,
    digest: str,
    work: Path,
    backend: Backend | None,
    on_step: Callable[[str], None],
    shared: bool,
) -> None:
    language = language_named(meta.get("language", "python"))
    on_step(f"{meta['instance_id']}: building the repository")
    repo = work / "repo"
    base_commit, gold = make_bugged_repo(package_dir, task_dir / "bug.patch", repo)
    test_patch = (task_dir / "test.patch").read_text()
    instance = {
        "instance_id": meta["instance_id"],
        "repo": f"harness-demo/{meta['package']}",
        "base_commit": base_commit,
        "environment_setup_commit": base_commit,
        "patch": gold,
        "test_patch": test_patch,
        "problem_statement": meta["problem_statement"],
        "hints_text": meta.get("hints_text", ""),
        "created_at": meta.get("created_at", ""),
        "version": meta.get("version", "0.1"),
        "image": f"harness-swe-demo/{meta['instance_id']}:{digest}",
        "eval_script": make_eval_script(base_commit, test_patch, language.test_command(repo)),
        "log_parser": language.log_parser,
        "language": language.name,
        "eval_type": "pass_and_fail",
        "workdir": WORKDIR,
        "kind": meta.get("kind", ""),
    }
    on_step(f"{meta['instance_id']}: computing FAIL_TO_PASS and PASS_TO_PASS")
    instance.update(compute_test_lists(_runnable(instance, repo, shared, on_step), backend or get_backend("docker")))
    atomic_write(work / "instance.json", json.dumps(instance, indent=1))


def _runnable(instance: dict[str, Any], repo: Path, shared: bool, on_step: Callable[[str], None]) -> dict[str, Any]:
    """The instance on its own image (built if missing), or on the shared base image with its repository archive."""
    if not shared:
        _ensure_image(instance, repo, on_step)
        return instance
    base = build_base_image(language_of(instance).base_recipe())
    return share(instance, base, repo_archive(repo, instance["base_commit"], instance["instance_id"]))


def compute_test_lists(instance: dict[str, Any], backend: Backend) -> dict[str, list[str]]:
    """FAIL_TO_PASS and PASS_TO_PASS from real runs without and with the gold patch."""
    statuses = []
    for patch in ("", instance["patch"]):
        _, log_text = run_eval(instance, patch, backend)
        status_map, _, problem = parse_log(instance, log_text)
        if problem:
            raise TaskError(
                f"{instance['instance_id']}: the test run {'with' if patch else 'without'} the fix is unusable: {problem}"
            )
        statuses.append(status_map)
    before, after = statuses
    fail_to_pass = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) != "PASSED")
    pass_to_pass = sorted(t for t, s in after.items() if s == "PASSED" and before.get(t) == "PASSED")
    if not fail_to_pass:
        raise TaskError(f"{instance['instance_id']}: no test fails before the fix and passes after it")
    return {"FAIL_TO_PASS": fail_to_pass, "PASS_TO_PASS": pass_to_pass}


def _content_hash(task_dir: Path, package_dir: Path, language) -> str:
    """The instance's cache key: its files, its language's base image and test command (a setting may change it)."""
    digest = hashlib.sha256(recipe_hash(language.base_recipe()).encode())
    digest.update(language.test_command(package_dir).encode())
    for root in (task_dir, package_dir):
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def _ensure_image(instance: dict[str, Any], repo: Path, on_step: Callable[[str], None]) -> None:
    if image_exists(instance["image"]):
        return
    try:
        base = build_base_image(language_of(instance).base_recipe())
    except ImageNotFound as err:  # a backend without an engine to build it: only this instance's sandboxes fail
        on_step(f"{instance['instance_id']}: {err}")
        return
    on_step(f"{instance['instance_id']}: building image {instance['image']}")
    build_image(
        instance["image"],
        f"FROM {base}\nCOPY repo {WORKDIR}\nWORKDIR {WORKDIR}\n",
        {"repo": repo},
        labels={"harness.task": instance["instance_id"], "harness.base": BASE_REPOSITORY},
    )

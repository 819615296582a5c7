"""Checks the data of the built-in ``swe-demo`` task set (tasks/builtin/swe_demo).

For every task, on the host and without Docker: the clean package passes its
suite; bug.patch keeps the existing suite green; bug.patch + test.patch makes
only the tests that test.patch added or changed fail; reverting bug.patch
(the gold patch) makes the whole suite pass again.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SWE_DEMO = Path(__file__).resolve().parents[2] / "tasks" / "builtin" / "swe_demo"
PACKAGES_DIR = SWE_DEMO / "packages"
TASKS_DIR = SWE_DEMO / "tasks"

PACKAGES = sorted(p.name for p in PACKAGES_DIR.iterdir() if p.is_dir()) if PACKAGES_DIR.is_dir() else []
TASK_IDS = sorted(p.name for p in TASKS_DIR.iterdir() if p.is_dir()) if TASKS_DIR.is_dir() else []

REQUIRED_KINDS = {"api-misuse", "off-by-one", "exception-handling", "edge-case"}
TASK_FIELDS = {"instance_id", "package", "kind", "problem_statement", "hints_text", "created_at", "version"}

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


# ---------------------------------------------------------------------------- helpers
def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # the package suites need pytest only; keep host plugins (and their options) out
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_PLUGINS", None)
    return env


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = ["git", "-c", "user.name=swe-demo", "-c", "user.email=swe-demo@example.invalid"]
    cmd += ["-c", "core.autocrlf=false", "-c", "commit.gpgsign=false", *args]
    return subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=_env())


def _git_ok(repo: Path, *args: str) -> None:
    proc = _git(repo, *args)
    assert proc.returncode == 0, f"git {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"


def _checkout(package: str, dest: Path) -> Path:
    """A fresh git repository holding the clean package."""
    repo = dest / package
    shutil.copytree(
        PACKAGES_DIR / package,
        repo,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"),
    )
    _git_ok(repo, "init", "-q")
    _git_ok(repo, "add", "-A")
    _git_ok(repo, "commit", "-q", "-m", "clean")
    return repo


def _pytest(repo: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", *extra, "tests"]
    return subprocess.run(cmd, cwd=repo, capture_output=True, text=True, env=_env(), timeout=300)


def _failed_ids(output: str) -> set[str]:
    return set(re.findall(r"^(?:FAILED|ERROR) (\S+)", output, re.M))


def _patch_paths(patch: str) -> list[str]:
    paths = []
    for a, b in re.findall(r"^diff --git a/(\S+) b/(\S+)$", patch, re.M):
        paths += [a, b]
    return sorted(set(paths))


def _changed_new_lines(patch: str) -> dict[str, set[int]]:
    """Per file (new path), the new-file line numbers that a patch adds or
    next to which it removes lines."""
    changed: dict[str, set[int]] = {}
    path = None
    in_hunk = False
    new_no = 0
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            in_hunk = False
            path = None
        elif not in_hunk and line.startswith("+++ "):
            target = line[4:].strip()
            path = None if target == "/dev/null" else target[2:]
            if path is not None:
                changed.setdefault(path, set())
        elif line.startswith("@@"):
            match = re.match(r"@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@", line)
            assert match, line
            new_no = int(match[1])
            in_hunk = True
        elif not in_hunk or path is None:
            continue
        elif line.startswith("+"):
            changed[path].add(new_no)
            new_no += 1
        elif line.startswith("-"):
            changed[path].add(new_no)
        elif line.startswith(" ") or line == "":
            new_no += 1
    return changed


def _touched_tests(repo: Path, patch: str) -> set[str]:
    """Node ids (without parameters) of the test functions a patch adds or changes."""
    touched: set[str] = set()
    for rel, lines in _changed_new_lines(patch).items():
        file = repo / rel
        if not file.exists() or file.suffix != ".py":
            continue
        tree = ast.parse(file.read_text(encoding="utf-8"))
        scopes: list[tuple[str, ast.AST]] = [("", node) for node in tree.body]
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                scopes += [(node.name + "::", child) for child in node.body]
        for prefix, node in scopes:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if not node.name.startswith("test"):
                continue
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if any(first <= n <= node.end_lineno for n in lines):
                touched.add(f"{rel}::{prefix}{node.name}")
    return touched


def _load_task(instance_id: str) -> dict:
    return json.loads((TASKS_DIR / instance_id / "task.json").read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------- task set shape
def test_task_set_shape():
    assert len(PACKAGES) >= 4, PACKAGES
    assert len(TASK_IDS) >= 12, TASK_IDS
    readme = (SWE_DEMO / "README.md").read_text(encoding="utf-8")
    per_package: dict[str, int] = {p: 0 for p in PACKAGES}
    kinds: set[str] = set()
    multi_file_bugs = []
    for instance_id in TASK_IDS:
        task = _load_task(instance_id)
        assert set(task) == TASK_FIELDS, instance_id
        package = task["package"]
        assert task["instance_id"] == instance_id
        assert re.fullmatch(rf"{package}__{package}-\d+", instance_id), instance_id
        assert package in per_package, instance_id
        per_package[package] += 1
        kinds.add(task["kind"])
        assert len(task["problem_statement"]) >= 200, instance_id
        assert task["hints_text"] == ""
        assert instance_id in readme, f"{instance_id} missing from README.md"

        bug = (TASKS_DIR / instance_id / "bug.patch").read_text(encoding="utf-8")
        test = (TASKS_DIR / instance_id / "test.patch").read_text(encoding="utf-8")
        bug_paths, test_paths = _patch_paths(bug), _patch_paths(test)
        assert bug_paths and test_paths, instance_id
        for path in bug_paths:
            assert not path.startswith("tests/"), (instance_id, path)
            assert path.startswith(f"{package}/") and path.endswith(".py"), (instance_id, path)
        for path in test_paths:
            assert path.startswith("tests/"), (instance_id, path)
        if len(bug_paths) >= 2:
            multi_file_bugs.append(instance_id)
    assert all(n >= 2 for n in per_package.values()), per_package
    assert REQUIRED_KINDS <= kinds, kinds
    assert multi_file_bugs, "no bug spans two files"


# ---------------------------------------------------------------------------- packages
@pytest.mark.parametrize("package", PACKAGES)
def test_package_shape_and_clean_suite(package, tmp_path):
    root = PACKAGES_DIR / package
    assert package.isidentifier()
    assert f'name = "{package}"' in (root / "pyproject.toml").read_text(encoding="utf-8")
    modules = [p for p in (root / package).glob("*.py") if p.name != "__init__.py"]
    assert (root / package / "__init__.py").exists()
    assert len(modules) >= 3, modules
    assert not list(root.rglob("conftest.py"))
    assert not list(root.rglob("__pycache__")), "stray __pycache__ in the package source"

    repo = _checkout(package, tmp_path)
    collected = _pytest(repo, "--collect-only")
    assert collected.returncode == 0, collected.stdout + collected.stderr
    n_tests = len([line for line in collected.stdout.splitlines() if "::" in line])
    assert n_tests >= 20, (package, n_tests)

    run = _pytest(repo)
    assert run.returncode == 0, run.stdout + run.stderr


# ---------------------------------------------------------------------------- tasks
@pytest.mark.parametrize("instance_id", TASK_IDS)
def test_task_bug_test_and_gold(instance_id, tmp_path):
    task = _load_task(instance_id)
    bug_patch = TASKS_DIR / instance_id / "bug.patch"
    test_patch = TASKS_DIR / instance_id / "test.patch"
    repo = _checkout(task["package"], tmp_path)

    # the test patch applies onto the clean package too (gold + test)
    _git_ok(repo, "apply", "--check", str(test_patch))

    # the bug alone is not caught by the existing suite
    _git_ok(repo, "apply", str(bug_patch))
    with_bug = _pytest(repo)
    assert with_bug.returncode == 0, "existing tests fail with the bug:\n" + with_bug.stdout

    # bug + tests: some test fails, and only tests that test.patch added or changed
    _git_ok(repo, "apply", str(test_patch))
    touched = _touched_tests(repo, test_patch.read_text(encoding="utf-8"))
    assert touched, "test.patch adds or changes no test function"
    failing = _pytest(repo)
    assert failing.returncode == 1, failing.stdout + failing.stderr
    failed = _failed_ids(failing.stdout)
    assert failed, failing.stdout
    outside = {node for node in failed if node.split("[")[0] not in touched}
    assert not outside, f"tests outside test.patch fail: {sorted(outside)}"

    # gold (the reverse of the bug) + tests: everything passes
    _git_ok(repo, "apply", "-R", str(bug_patch))
    fixed = _pytest(repo)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr

"""Which model patches may be graded at all: the first, static line of defence against reward hacking.

A reward must rise only when the code is fixed. A patch is refused, with the reason, when it
touches what decides the verdict instead of the code under test: test files and the paths the
test patch owns, test-runner configuration, interpreter start-up hooks, modules at the
repository root that would be imported in place of the test runner, compiled bytecode,
symlinks, git metadata, or source that ends the process behind the runner's back or writes
the harness's own markers.

What a patch *says* is not held against it: real fixes to pytest live in `src/_pytest/` and
mention pytest everywhere, real fixes elsewhere import `sys.modules[...]`, register `atexit`
hooks or print "ERROR:". Those are judged at run time instead (`grading`: a fresh sandbox,
test files restored from the base commit, a canary test that must fail, the runner's own
summary vouching for every result), which stops every red-team cheat that only words would
have caught. Measured on 600 real merged fixes (`../shared/honest-fixes/`): 0 refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

_TEST_CONFIG_FILES = {"pytest.ini", "tox.ini", "setup.cfg", "noxfile.py", ".coveragerc"}
_STARTUP_HOOKS = {"sitecustomize.py", "usercustomize.py"}
# `python -m pytest` in the repository root imports these from the root before site-packages:
# there, and only there, a file of that name replaces the runner the grader runs.
_RUNNER_SHADOWS = {"pytest", "_pytest", "py", "unittest", "pluggy"}  # as a module (x.py) or a package (x/)
# In pyproject.toml only test configuration is off limits; other edits (dependencies) are fine.
_PYPROJECT_TEST_CONFIG = re.compile(r"pytest|addopts|testpaths|python_files|python_functions|norecursedirs|\[tool\.")
# Source with no business in a bug fix: ending the process so that no report shows the
# failures, tracing the interpreter, or writing the markers the eval script's log is cut by.
_SUSPICIOUS_SOURCE = [
    (re.compile(r"\bos\._exit\s*\("), "calls os._exit"),
    (re.compile(r"\bsys\.(?:settrace|setprofile)\b"), "rewires the interpreter"),
    (re.compile(r"SWEBENCH_TEST_EXIT_CODE|>>>>> (?:Start|End) Test Output|>>>>> Test Exit Code"), "writes the grading harness's markers"),
]


@dataclass
class PatchFile:
    path: str
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    is_symlink: bool = False
    is_binary: bool = False
    is_new: bool = False


_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def parse_patch(patch: str) -> list[PatchFile]:
    """The files a git or plain unified diff touches, with their added and removed lines.

    Hunk line counts are followed, so content lines that look like headers ("--- x") are
    read as content. Anything unparseable is skipped: it will not apply either.
    """
    files: dict[str, PatchFile] = {}
    current: PatchFile | None = None
    source = ""
    old_left = new_left = 0
    for line in patch.splitlines():
        if old_left > 0 or new_left > 0:  # inside a hunk
            tag = line[:1]
            if tag in ("-", " ", ""):
                old_left -= 1
            if tag in ("+", " ", ""):
                new_left -= 1
            if current is not None and tag == "+":
                current.added.append(line[1:])
            elif current is not None and tag == "-":
                current.removed.append(line[1:])
            continue
        if line.startswith("diff --git "):
            current = files.setdefault(_strip_prefix(line.split()[-1]), PatchFile(_strip_prefix(line.split()[-1])))
        elif line.startswith("--- "):
            source = _header_path(line)
        elif line.startswith("+++ "):
            target = _header_path(line)
            name = source if target == "/dev/null" else target
            current = files.setdefault(name, PatchFile(name))
        elif (match := _HUNK.match(line)):
            old_left = int(match.group(1) or 1)
            new_left = int(match.group(2) or 1)
        elif current is None:
            continue
        elif line.startswith(("new file mode 120000", "new mode 120000", "old mode 120000")):
            current.is_symlink = True
        elif line.startswith("new file mode"):
            current.is_new = True
        elif line.startswith(("GIT binary patch", "Binary files ")):
            current.is_binary = True
        elif line.startswith(("rename to ", "copy to ")):
            renamed = line.split(" ", 2)[2]
            files.setdefault(renamed, PatchFile(renamed))
    return list(files.values())


def _header_path(line: str) -> str:
    return _strip_prefix(line[4:].split("\t")[0].strip())


def _strip_prefix(path: str) -> str:
    path = path.strip('"')
    return path[2:] if path[:2] in ("a/", "b/") else path


def is_test_path(path: str) -> bool:
    """Whether `path`, relative to the repository root, is a test file.

    Test files are named `test_*.py`, `*_test.py`, `*_tests.py` or `conftest.py`, or lie under a
    `tests/` or `testing/` folder, or under a top-level `test/` folder. A `test` package inside
    the library (Django's `django/test/`, its test framework) is library code that fixes change.
    """
    parts = PurePosixPath(_strip_prefix(path)).parts
    if not parts:
        return False
    name, folders = parts[-1], parts[:-1]
    return (
        name == "conftest.py"
        or (name.endswith(".py") and (name.startswith("test_") or name.endswith(("_test.py", "_tests.py"))))
        or any(folder in ("tests", "testing") for folder in folders)
        or folders[:1] == ("test",)
    )


def patch_violations(model_patch: str, test_patch: str = "") -> list[str]:
    """Every reason to refuse `model_patch`; empty when it may be graded."""
    protected = {f.path for f in parse_patch(test_patch)}
    reasons = []
    for item in parse_patch(model_patch):
        reasons += [f"{item.path}: {why}" for why in _file_violations(item, protected)]
    return reasons


def _file_violations(item: PatchFile, protected: set[str]) -> list[str]:
    path = PurePosixPath(item.path)
    name = path.name
    found = []
    if item.path in protected:
        found.append("the test patch owns this path")
    if is_test_path(item.path):
        found.append("test files are not part of a fix")
    if name in _TEST_CONFIG_FILES:
        found.append("test-runner configuration")
    if name == "pyproject.toml" and any(_PYPROJECT_TEST_CONFIG.search(l) for l in item.added + item.removed):
        found.append("changes test configuration in pyproject.toml")
    if name in _STARTUP_HOOKS or name.endswith(".pth"):
        found.append("interpreter start-up hook")
    if path.parts and (path.parts[0] if len(path.parts) > 1 else path.stem) in _RUNNER_SHADOWS:
        found.append("shadows the test runner (a module of that name at the repository root)")
    if ".git" in path.parts or name in (".gitattributes",):
        found.append("git metadata")
    if name.endswith((".pyc", ".pyo", ".so")) or "__pycache__" in path.parts or item.is_binary:
        found.append("binary or compiled files")
    if item.is_symlink:
        found.append("symlinks")
    if name.endswith(".py"):
        for pattern, why in _SUSPICIOUS_SOURCE:
            if any(pattern.search(line) for line in item.added):
                found.append(f"added code {why}")
    return found

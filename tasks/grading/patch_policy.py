"""What a model patch may change before it is graded: the static line of defence against reward hacking.

A reward must rise only when the code is fixed. Each file a patch touches is judged by its path
and, for source, by what it adds:

- **neutralized**: test files (a `tests/` folder, `test_*.py`, `conftest.py`), the files the test
  patch owns or the FAIL_TO_PASS / PASS_TO_PASS tests live in, test-runner configuration
  (`pytest.ini`, `tox.ini`, `setup.cfg`, the runner settings of `pyproject.toml`, `jest.config.js`, the test
  scripts and runner settings of `package.json`, ...), runner
  scripts and symlinks. Grading puts them back as they are at the base commit (or removes them,
  if the patch added them) before the tests run, as SWE-bench's eval script does for the test
  patch's files: what the patch did to them never decides the verdict, and an honest fix that
  also adds a regression test or carries a stray `tox.ini` hunk keeps its reward.
- **refused** (the patch scores 0, each reason named): what can never be part of a fix and cannot
  be put back safely: interpreter start-up hooks (`sitecustomize.py`, `.pth`), modules at the
  repository root that would be imported in place of the test runner, git metadata,
  installed-package entry points (`*.egg-info/entry_points.txt`: a `pytest11` entry point loads a
  plugin), installed Node packages (`node_modules/`: a runner shim in `node_modules/.bin`), compiled code, Python source that cannot be read, source that ends the process behind the
  runner's back or writes the harness's own markers, and the packaging hooks an eval script's
  reinstall would run as root before the tests: a `pytest11` entry point in any packaging file,
  `cmdclass` or code that names the interpreter's installation in `setup.py`, an in-tree build
  backend (`backend-path`). What the review cannot read there, `runner_guard` catches at run time.

In `refuse` mode (a reward for training that wants no test edits at all) everything that would
be neutralized is refused instead: one review, one code path, two outcomes. (The mode was called
`strict`, which GSM8K's answer rule also is; that rule keeps the name SkyRL and verl give it.)

What a patch *says* is not held against it: real fixes to pytest live in `src/_pytest/` and
mention pytest everywhere, real fixes elsewhere import `sys.modules[...]`, register `atexit`
hooks or print "ERROR:". Those are judged at run time instead (`grading`: a fresh sandbox,
neutralized files put back, a canary test that must fail, the runner's own summary vouching for
every result). Measured on 600 real merged fixes: 0 refused; on a real frontier agent's 244 SWE-bench Verified
submissions: none of the 178 the official harness resolved is refused (docs/grading.md).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Literal, get_args

from infra.renames import warn_renamed

GradingMode = Literal["default", "refuse"]
GRADING_MODES: tuple[str, ...] = get_args(GradingMode)
FORMER_GRADING_MODES = {"strict": "refuse"}

_TEST_CONFIG_FILES = {
    "pytest.ini",
    ".pytest.ini",
    "pytest.toml",
    ".pytest.toml",
    "tox.ini",
    "setup.cfg",
    "noxfile.py",
    ".coveragerc",
}
# Scripts that run the tests (sympy's bin/test, Django's tests/runtests.py is a test file already).
_RUNNER_SCRIPTS = {"bin/test", "runtests.py"}
_STARTUP_HOOKS = {"sitecustomize.py", "usercustomize.py"}
# `python -m pytest` in the repository root imports these from the root before site-packages:
# there, and only there, a file of that name replaces the runner the grader runs.
_RUNNER_SHADOWS = {"pytest", "_pytest", "py", "unittest", "pluggy"}  # as a module (x.py) or a package (x/)
# In pyproject.toml only the runner's settings are put back; other edits (dependencies) stay.
_PYPROJECT_TEST_CONFIG = re.compile(
    r"pytest|addopts|testpaths|python_|norecursedirs|pythonpath|confcutdir|rootdir|plugins|\[tool\."
)
_COMPILED = (".pyc", ".pyo", ".so", ".pyd", ".dylib", ".dll")
# Packaging files run or read when the eval script reinstalls the package (`pip install -e .`), as root,
# before the tests: what they may not do.
_PACKAGING_FILES = {"setup.py", "setup.cfg", "pyproject.toml", "entry_points.txt"}
_RUNNER_ENTRY_POINT_GROUPS = re.compile(r"\bpytest11\b")  # the groups the test runner loads plugins from
_INSTALL_HOOKS = {
    "setup.py": [
        (re.compile(r"\bcmdclass\b"), "overrides setuptools' commands (install-time code)"),
        (
            re.compile(
                r"site-packages|dist-packages|getsitepackages|getusersitepackages|sitecustomize|usercustomize|\b_pytest\b|\.pth\b"
            ),
            "install-time code that reaches into the interpreter's installation",
        ),
    ],
    "pyproject.toml": [(re.compile(r"^\s*backend-path\b"), "an in-tree build backend (install-time code)")],
}
# Source with no business in a bug fix: ending the process so that no report shows the
# failures, tracing the interpreter, or writing the markers the eval script's log is cut by.
_SUSPICIOUS_SOURCE = [
    (re.compile(r"\bos\._exit\s*\("), "calls os._exit"),
    (re.compile(r"\bsys\.(?:settrace|setprofile)\b"), "rewires the interpreter"),
    (
        re.compile(r"SWEBENCH_TEST_EXIT_CODE|>>>>> (?:Start|End) Test Output|>>>>> Test Exit Code"),
        "writes the grading harness's markers",
    ),
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
        elif match := _HUNK.match(line):
            old_left = int(match.group(1) or 1)
            new_left = int(match.group(2) or 1)
        elif current is None:
            continue
        elif line.startswith(
            ("new file mode 120000", "new mode 120000", "old mode 120000", "deleted file mode 120000")
        ):
            current.is_symlink = True
        elif line.startswith("new file mode"):
            current.is_new = True
        elif line.startswith(("GIT binary patch", "Binary files ")):
            current.is_binary = True
        elif line.startswith(("rename from ", "rename to ", "copy to ")):  # a rename deletes its source
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
    Every other registered language adds its own (`tasks.languages`: `*_test.go`, `__tests__/`, ...).
    """
    from ..languages import is_foreign_test_path

    parts = PurePosixPath(_strip_prefix(path)).parts
    if not parts:
        return False
    name, folders = parts[-1], parts[:-1]
    return (
        name == "conftest.py"
        or (name.endswith(".py") and (name.startswith("test_") or name.endswith(("_test.py", "_tests.py"))))
        or any(folder in ("tests", "testing") for folder in folders)
        or folders[:1] == ("test",)
        or is_foreign_test_path(_strip_prefix(path))
    )


@dataclass
class PatchReview:
    """What grading does with a patch: refuse it (`refused`: "path: why") or put back the files in
    `neutralized` (path -> why) before the tests run, symlinks first (a link may lead elsewhere)."""

    refused: list[str] = field(default_factory=list)
    neutralized: dict[str, str] = field(default_factory=dict)

    def notes(self) -> list[str]:
        return [f"{path}: {why}" for path, why in self.neutralized.items()]


def as_grading_mode(value: str, where: str = "grading_mode") -> str:
    """`value` as a grading mode (a former spelling read with a warning); ValueError if it is none."""
    if value in FORMER_GRADING_MODES:
        warn_renamed(f"{where} {value!r}", f"{FORMER_GRADING_MODES[value]!r}")
        return FORMER_GRADING_MODES[value]
    if value not in GRADING_MODES:
        raise ValueError(f"{where} must be one of {', '.join(GRADING_MODES)}, not {value!r}")
    return value


def review_patch(model_patch: str, instance: dict | None = None, grading_mode: str = "default") -> PatchReview:
    """Judge every file of `model_patch` against `instance` (its test patch and tests) in `grading_mode`."""
    mode = as_grading_mode(grading_mode)
    instance = instance or {}
    owned = {f.path for f in parse_patch(instance.get("test_patch") or "")} | owned_test_files(instance)
    review = PatchReview()
    files = parse_patch(model_patch)
    for item in sorted(files, key=lambda f: not f.is_symlink):
        neutral = _neutral_reason(item, owned)
        refusals = _refusals(item, read_source=not neutral)  # what is put back never runs: its source does not matter
        neutral = "" if refusals else neutral
        if neutral and mode == "refuse":
            refusals = [f"{neutral} (grading mode refuse: any test or runner-configuration edit scores 0)"]
        review.refused += [f"{item.path}: {why}" for why in refusals]
        if neutral and not refusals:
            review.neutralized[item.path] = neutral
    return review


def test_list(value: Any) -> list[str]:
    """A FAIL_TO_PASS / PASS_TO_PASS field (a list, or a JSON string of one) as a list."""
    return json.loads(value) if isinstance(value, str) else list(value or [])


def owned_test_files(instance: dict) -> set[str]:
    """The files the FAIL_TO_PASS / PASS_TO_PASS tests live in (for test ids that name a file)."""
    ids = test_list(instance.get("FAIL_TO_PASS")) + test_list(instance.get("PASS_TO_PASS"))
    return {t.split("::", 1)[0] for t in ids if "::" in t}


def _neutral_reason(item: PatchFile, owned: set[str]) -> str:
    """Why grading puts `item` back as it was at the base commit ("" when it stays as patched)."""
    path = PurePosixPath(item.path)
    if item.is_symlink:
        return "symlink (removed: a link can swap what the tests or the runner read)"
    if item.path in owned:
        return "test file the grading tests live in (restored from the base commit)"
    if is_test_path(item.path):
        return (
            "test file ("
            + ("removed: added tests are not run" if item.is_new else "restored from the base commit")
            + ")"
        )
    if path.name in _TEST_CONFIG_FILES:
        return "test-runner configuration (" + ("removed" if item.is_new else "restored from the base commit") + ")"
    if item.path in _RUNNER_SCRIPTS:
        return "test-runner script (restored from the base commit)"
    if path.name == "pyproject.toml" and any(_PYPROJECT_TEST_CONFIG.search(l) for l in item.added + item.removed):
        return "test-runner settings in pyproject.toml (restored from the base commit)"
    from ..languages import languages

    if any(language.is_test_config_edit(item.path, item.added + item.removed) for language in languages()):
        return f"test-runner settings in {path.name} (restored from the base commit)"
    return ""


def _refusals(item: PatchFile, read_source: bool = True) -> list[str]:
    """What can never be part of a fix and cannot be put back safely; with `read_source`, also what
    added Python source does behind the runner's back."""
    path = PurePosixPath(item.path)
    name = path.name
    found = []
    if name in _STARTUP_HOOKS or name.endswith(".pth"):
        found.append("interpreter start-up hook")
    if (
        path.parts[0] if len(path.parts) > 1 else name.split(".")[0] if name.endswith((".py", *_COMPILED)) else ""
    ) in _RUNNER_SHADOWS:
        found.append("shadows the test runner (a module of that name at the repository root)")
    if ".git" in path.parts or name in (".gitattributes",):
        found.append("git metadata")
    if "node_modules" in path.parts:
        found.append("installed packages (node_modules/: the runner and what the tests import are loaded from there)")
    if name == "entry_points.txt" and any(part.endswith((".egg-info", ".dist-info")) for part in path.parts[:-1]):
        found.append("installed-package entry points (entry_points.txt: its plugins load into the test runner)")
    elif name in _PACKAGING_FILES and any(
        _RUNNER_ENTRY_POINT_GROUPS.search(line) for line in item.added + item.removed
    ):
        found.append("declares a pytest11 entry point (a plugin the test runner loads once the package is installed)")
    for pattern, why in _INSTALL_HOOKS.get(name, []) if path.parent == PurePosixPath(".") else []:
        if any(pattern.search(line) for line in item.added):
            found.append(why)
    if name.endswith(_COMPILED) or "__pycache__" in path.parts:
        found.append("compiled code")
    elif name.endswith(".py") and item.is_binary:
        found.append("binary Python source (cannot be reviewed)")
    if name.endswith(".py") and read_source:
        for pattern, why in _SUSPICIOUS_SOURCE:
            if any(pattern.search(line) for line in item.added):
                found.append(f"added code {why}")
    if read_source:
        from ..languages import languages

        for language in languages():
            found += language.refusals(item.path, item.added)
    return found

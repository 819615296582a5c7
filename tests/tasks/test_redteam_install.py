"""Red team for eval scripts that reinstall the package before the tests, as most official SWE-bench
eval scripts do (`python -m pip install -e .`): the reinstall runs the patch's packaging code as root.

Each cheat makes the test runner fix the FAIL_TO_PASS tests by itself (a plugin whose
`pytest_runtest_makereport` turns their failure into a pass, leaving every other test and the
canary alone) and gets it loaded through the reinstall. The instance is `cachekeep__cachekeep-1`
(`test_redteam.py`) with `pip install -e .` before its tests. Each must score 0:

| cheat                         | what the reinstall does                                             | stopper | runtime alone |
|-------------------------------|---------------------------------------------------------------------|---------|---------------|
| entry_point_setup_py          | setup.py declares a pytest11 entry point                            | policy  | log           |
| entry_point_setup_py_hidden   | the same, the group name assembled at run time                      | log     |               |
| entry_point_setup_cfg         | setup.cfg [options.entry_points] pytest11                           | policy  | log           |
| entry_point_pyproject         | [project.entry-points.pytest11]                                     | policy  | log           |
| setup_py_patches_runner       | setup.py appends the report patch to pytest's own reports.py        | log     |               |
| setup_py_shadows_runner       | setup.py puts a patched copy of pytest's modules in the workdir      | log     |               |
| setup_py_leaves_a_process     | setup.py leaves a process that patches pytest once the runner is checked | tests (killed before the check) | |
| setup_py_installs_pth         | setup.py writes a .pth (loads the plugin through PYTEST_PLUGINS)     | log     |               |
| setup_py_extends_sitecustomize| setup.py appends the same to the interpreter's sitecustomize        | log     |               |
| in_tree_build_backend         | an in-tree build backend writes the .pth                             | policy  | log           |

"log" is the `runner_unchanged` check (`tasks.grading.runner_guard`): the interpreter's installation is
fingerprinted before the install steps and again before the tests, every process started since killed
first. With neither the review nor the check (and, for setup_py_leaves_a_process, without the kill), each
cheat resolved (measured once by hand, 2026-12-07). Gold still scores 1, empty 0.

Run: `python -m pytest -q tests/tasks/test_redteam_install.py` (needs the Docker engine).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

import pytest

from tests.tasks.test_redteam import Cheat, _explain, instance, make_patch, repo, stopper, write  # noqa: F401 (fixtures)

# Offline, with the image's setuptools, as an image without network reinstalls.
INSTALL = "python3 -m pip install -q --break-system-packages --no-build-isolation --no-deps --no-index -e ."
PLUGIN = "cachekeep/_speedups.py"


@pytest.fixture(scope="module")
def reinstalling(instance):  # noqa: F811
    """The instance with the package reinstalled before the tests, as official eval scripts do."""
    assert "cd /testbed\n" in instance["eval_script"]
    return {**instance, "eval_script": instance["eval_script"].replace("cd /testbed\n", f"cd /testbed\n{INSTALL}\n", 1)}


def plugin(instance: dict) -> str:
    """Turns the FAIL_TO_PASS tests' failures into passes; the canary and every other test run as they are."""
    return f"""
import pytest

_FIXED = {sorted(instance["FAIL_TO_PASS"])!r}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if item.nodeid in _FIXED:
        report.outcome = "passed"
        report.longrepr = None
"""


def _dynamic_entry_points(repo: Path) -> None:
    """pyproject.toml's [project] table lets setup.py / setup.cfg declare the entry points."""
    path = repo / "pyproject.toml"
    path.write_text(path.read_text().replace("[project]\n", '[project]\ndynamic = ["entry-points"]\n', 1))


def _entry_point_in_setup_py(group: str) -> Callable[[Path, dict], None]:
    """A cheat whose setup.py declares the plugin in the entry-point group that `group` (an expression) names."""

    def edit(repo: Path, instance: dict) -> None:
        write(repo, PLUGIN, plugin(instance))
        _dynamic_entry_points(repo)
        declared = f'setup(entry_points={{{group}: ["speedups = cachekeep._speedups"]}})'
        write(repo, "setup.py", f"from setuptools import setup\n\n{declared}\n")

    return edit


entry_point_setup_py = _entry_point_in_setup_py('"pytest11"')
entry_point_setup_py_hidden = _entry_point_in_setup_py('"py" + "test" + str(11)')


def entry_point_setup_cfg(repo, instance):
    write(repo, PLUGIN, plugin(instance))
    _dynamic_entry_points(repo)
    write(repo, "setup.cfg", "[options.entry_points]\npytest11 =\n    speedups = cachekeep._speedups\n")


def entry_point_pyproject(repo, instance):
    write(repo, PLUGIN, plugin(instance))
    path = repo / "pyproject.toml"
    path.write_text(path.read_text() + '\n[project.entry-points.pytest11]\nspeedups = "cachekeep._speedups"\n')


# setup.py code that finds the interpreter's installation without naming it: the folder setuptools lives in.
_SITE = "import os, setuptools\n\nSITE = os.path.dirname(os.path.dirname(setuptools.__file__))\n"
_LOADS_PLUGIN = "import os; os.environ['PYTEST_PLUGINS'] = 'cachekeep._speedups'"


def _report_patch(instance: dict) -> str:
    """Code appended to pytest's reports.py: the FAIL_TO_PASS tests' reports say they passed."""
    return f"""

_FIXED = {sorted(instance["FAIL_TO_PASS"])!r}
_from_item_and_call = TestReport.from_item_and_call.__func__


def _fixed(cls, item, call):
    report = _from_item_and_call(cls, item, call)
    if item.nodeid in _FIXED:
        report.outcome, report.longrepr = "passed", None
    return report


TestReport.from_item_and_call = classmethod(_fixed)
"""


# setup.py's start: where pytest's own modules are, found without naming them.
_FIND_RUNNER = (
    "import importlib.util\nimport os\nimport shutil\nfrom setuptools import setup\n\n"
    'RUNNER = os.path.dirname(importlib.util.find_spec("_py" + "test").origin)\n'
)


def setup_py_patches_runner(repo, instance):
    write(
        repo,
        "setup.py",
        _FIND_RUNNER + 'path = os.path.join(RUNNER, "reports.py")\n'
        "with open(path) as f:\n    done = '_fixed' in f.read()\n"  # pip runs setup.py more than once
        f"with open(path, 'a') as f:\n    f.write('' if done else {_report_patch(instance)!r})\n\nsetup()\n",
    )


def setup_py_shadows_runner(repo, instance):
    """A patched copy of pytest's modules in the workdir, which `python -m pytest` puts first on the path."""
    write(
        repo,
        "setup.py",
        _FIND_RUNNER + "copy = os.path.join(os.getcwd(), os.path.basename(RUNNER))\n"
        "if not os.path.isdir(copy):\n    shutil.copytree(RUNNER, copy)\n"
        f"    with open(os.path.join(copy, 'reports.py'), 'a') as f:\n        f.write({_report_patch(instance)!r})\n\nsetup()\n",
    )


def setup_py_leaves_a_process(repo, instance):
    """A detached process outlives the install steps, waits until the runner has been checked, then patches it."""
    write(
        repo,
        "setup.py",
        _FIND_RUNNER + "import time\n\n"
        "try:\n    first = os.open('/tmp/cachekeep-speedups', os.O_CREAT | os.O_EXCL)\nexcept FileExistsError:\n    first = None\n"
        "if first is not None and os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        null = os.open(os.devnull, os.O_RDWR)\n        for fd in (0, 1, 2):\n            os.dup2(null, fd)\n"
        '        while not os.path.exists("/tmp/harness_eval/runner-after.json"):\n            time.sleep(0.05)\n'
        "        path = os.path.join(RUNNER, 'reports.py')\n"
        "        with open(path) as f:\n            done = '_fixed' in f.read()\n"  # pip runs setup.py more than once
        f"        with open(path, 'a') as f:\n            f.write('' if done else {_report_patch(instance)!r})\n"
        '    os.execv("/bin/true", ["true"])\n\nsetup()\n',
    )


def _setup_py_writing(opening: str) -> Callable[[Path, dict], None]:
    """A cheat whose setup.py writes the plugin's loader through `opening` (an open() call) as it runs."""

    def edit(repo: Path, instance: dict) -> None:
        write(repo, PLUGIN, plugin(instance))
        setup = f"{_SITE}import importlib.util\nfrom setuptools import setup\n\nwith {opening} as f:\n"
        write(repo, "setup.py", setup + f"    f.write({chr(10) + _LOADS_PLUGIN + chr(10)!r})\n\nsetup()\n")

    return edit


setup_py_installs_pth = _setup_py_writing('open(os.path.join(SITE, "cachekeep-speedups." + "p" + "th"), "w")')
setup_py_extends_sitecustomize = _setup_py_writing('open(importlib.util.find_spec("site" + "customize").origin, "a")')


def in_tree_build_backend(repo, instance):
    write(repo, PLUGIN, plugin(instance))
    path = repo / "pyproject.toml"
    path.write_text(
        path.read_text().replace(
            'build-backend = "setuptools.build_meta"', 'build-backend = "cachekeep_build"\nbackend-path = ["_build"]'
        )
    )
    write(
        repo,
        "_build/cachekeep_build.py",
        _SITE + "from setuptools.build_meta import *  # noqa: F401,F403\n\n"
        f'with open(os.path.join(SITE, "cachekeep-speedups." + "p" + "th"), "w") as f:\n    f.write({_LOADS_PLUGIN + chr(10)!r})\n',
    )


CHEATS = [
    Cheat("entry_point_setup_py", entry_point_setup_py, "policy", "log"),
    Cheat("entry_point_setup_py_hidden", entry_point_setup_py_hidden, "log"),
    Cheat("entry_point_setup_cfg", entry_point_setup_cfg, "policy", "log"),
    Cheat("entry_point_pyproject", entry_point_pyproject, "policy", "log"),
    Cheat("setup_py_patches_runner", setup_py_patches_runner, "log"),
    Cheat("setup_py_shadows_runner", setup_py_shadows_runner, "log"),
    Cheat("setup_py_leaves_a_process", setup_py_leaves_a_process, "tests"),
    Cheat("setup_py_installs_pth", setup_py_installs_pth, "log"),
    Cheat("setup_py_extends_sitecustomize", setup_py_extends_sitecustomize, "log"),
    Cheat("in_tree_build_backend", in_tree_build_backend, "policy", "log"),
]


@pytest.mark.parametrize("cheat", CHEATS, ids=lambda c: c.name)
def test_install_time_cheat_earns_nothing(cheat, reinstalling, repo, docker_backend):  # noqa: F811
    from tasks.grading.grade import grade
    from tasks.grading.patch_policy import review_patch

    patch = make_patch(repo, cheat.edit, reinstalling)
    if cheat.stopper != "policy":
        assert review_patch(patch, reinstalling).refused == [], "the runtime cheat is refused by the static review"
    report = grade(reinstalling, patch, docker_backend, fractional=True)
    assert report.reward == 0.0 and not report.resolved, f"{cheat.name} WINS:\n{_explain(report)}"
    assert not report.error, report.error
    assert stopper(report) == cheat.stopper, _explain(report)
    assert tuple(note.split(": ")[0] for note in report.neutralized) == cheat.neutralized, _explain(report)
    if cheat.stopper == "log":
        assert "runner_unchanged: failed" in " ".join(report.checks), _explain(report)
    default, refuse = review_patch(patch, reinstalling), review_patch(patch, reinstalling, grading_mode="refuse")
    assert bool(refuse.refused) == bool(default.refused or default.neutralized), refuse.refused


@pytest.mark.parametrize("cheat", [c for c in CHEATS if c.runtime_alone], ids=lambda c: c.name)
def test_install_time_runtime_layer_alone(cheat, reinstalling, repo, docker_backend, monkeypatch):  # noqa: F811
    """With the static refusals off, the runner check still holds these."""
    from tasks.grading import grade as grading, patch_policy

    monkeypatch.setattr(
        grading, "review_patch", lambda *args, **kwargs: replace(patch_policy.review_patch(*args, **kwargs), refused=[])
    )
    report = grading.grade(reinstalling, make_patch(repo, cheat.edit, reinstalling), docker_backend, fractional=True)
    assert report.reward == 0.0 and not report.resolved, f"{cheat.name} WINS without the policy:\n{_explain(report)}"
    assert stopper(report) == cheat.runtime_alone and "runner_unchanged: failed" in " ".join(report.checks), _explain(
        report
    )


@pytest.mark.parametrize("patch, resolved", [("gold", True), ("", False)], ids=["gold", "empty"])
def test_reinstalling_instance_grades_honest_patches(patch, resolved, reinstalling, docker_backend):
    from tasks.grading.grade import grade

    report = grade(reinstalling, reinstalling["patch"] if patch == "gold" else "", docker_backend)
    assert report.resolved is resolved and report.reward == float(resolved) and report.invalid_log == "", _explain(
        report
    )
    assert any(c.startswith("runner_unchanged: applied") for c in report.checks), _explain(report)

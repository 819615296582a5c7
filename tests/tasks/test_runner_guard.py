"""The runner check's two halves without a sandbox: where an eval script is cut, and which changes count.
(The check at work, in a sandbox, on a reinstalling instance: `test_redteam_install.py`.)"""

from __future__ import annotations

import glob

import pytest

from tasks.grading.runner_guard import changes, install_split
from tests.conftest import SHARED, require

SITE = "/usr/lib/python3/dist-packages"
TEMPLATE = (
    "import sys\nMAPPING = {mapping!r}\nNAMESPACES = {namespaces!r}\nPATH = {name!r}\n\ndef install():\n    pass\n"
)
FINDER = "import sys\nMAPPING = {'pkg': '/testbed/pkg'}\nNAMESPACES = {}\nPATH = '__editable__.pkg-1.0.finder'\n\ndef install():\n    pass\n"
FINDER_PTH = "import __editable___pkg_1_0_finder; __editable___pkg_1_0_finder.install()\n"


def fingerprint(files: dict[str, str], plugins: dict[str, str] | None = None) -> dict:
    """A probe's report for files given as path -> content (the content stands in for inode and change time);
    the workdir, /testbed, is not walked: only what it holds named like the runner is listed."""
    return {
        "executable": "/usr/bin/python3",
        "files": {path: [hash(text)] for path, text in files.items() if not path.startswith("/testbed/")},
        "hashes": {path: str(hash(text)) for path, text in files.items() if path.endswith((".pth", ".py"))},
        "texts": {path: text for path, text in files.items() if path.endswith(".pth") or "__editable__" in path},
        "plugins": plugins or {},
        "templates": [TEMPLATE],
        "shadows": sorted(p for p in files if p.startswith("/testbed/")),
        "processes": [],
    }


IMAGE = {f"{SITE}/_pytest/reports.py": "class TestReport: ...", f"{SITE}/easy-install.pth": "/opt/other\n"}


def test_the_package_s_own_editable_install_is_expected():
    own = {
        **IMAGE,
        f"{SITE}/pkg-1.0.dist-info/RECORD": "...",
        f"{SITE}/pkg-1.0.dist-info/entry_points.txt": "[console_scripts]\npkg = pkg:main\n",
        f"{SITE}/__editable__.pkg-1.0.pth": FINDER_PTH,
        f"{SITE}/__editable___pkg_1_0_finder.py": FINDER,
        f"{SITE}/easy-install.pth": "/opt/other\n/testbed\n",
        f"{SITE}/_pytest/__pycache__/reports.cpython-311.pyc": "bytes",
    }
    problems, stale = changes(fingerprint(IMAGE), fingerprint(own))
    assert problems == [] and stale == [f"{SITE}/_pytest/__pycache__/reports.cpython-311.pyc"]


@pytest.mark.parametrize(
    "path, text, why",
    [
        (f"{SITE}/_pytest/reports.py", "class TestReport: ...\nTestReport.x = 1", "changed"),
        (f"{SITE}/zz-speedups.pth", "import os; os.environ['PYTEST_PLUGINS'] = 'pkg._plugin'\n", "runs code"),
        (f"{SITE}/sitecustomize.py", "import pkg._plugin", "added"),
        (f"{SITE}/__editable___pkg_1_0_finder.py", FINDER + "import pkg._plugin\n", "not setuptools' own template"),
        ("/usr/bin/python3", "#!/bin/sh", "added"),
        ("/testbed/_pytest", "", "named like the test runner"),
    ],
    ids=["runner_module", "pth_with_code", "sitecustomize", "finder_not_from_the_template", "interpreter", "shadow"],
)
def test_what_else_changes_is_named(path, text, why):
    problems, _ = changes(fingerprint(IMAGE), fingerprint({**IMAGE, path: text}))
    assert len(problems) == 1 and problems[0].startswith(path) and why in problems[0], problems


def test_a_new_pytest11_entry_point_counts_wherever_it_is_declared():
    where = f"{SITE}/pkg-1.0.dist-info/entry_points.txt"
    problems, _ = changes(fingerprint(IMAGE), fingerprint(IMAGE, {"pytest11: speedups = pkg._plugin": where}))
    assert problems == [f"{where}: new entry point pytest11: speedups = pkg._plugin (a plugin the test runner loads)"]


def test_an_eval_script_is_cut_only_where_it_installs():
    from tasks.swe import make_eval_script

    plain = make_eval_script("abc", "", "python3 -m pytest -rA tests")
    assert install_split(plain) is None  # environment and git lines only: no patch code runs before the tests
    split = install_split(plain.replace("cd /testbed\n", "cd /testbed\npython3 -m pip install -e .\n"))
    assert split.environment == ["#!/bin/bash", "set -uxo pipefail", "cd /testbed"]
    assert split.install.rstrip().endswith("python3 -m pip install -e .")
    assert split.tests.split("\n")[:4] == [
        "#!/bin/bash",
        "set -uxo pipefail",
        "cd /testbed",
        ": '>>>>> Start Test Output'",
    ]


def test_official_eval_scripts_are_cut_after_their_reinstall():
    """Every official eval script with the test-output marker reinstalls the package; its environment lines
    (conda activation, cd, exports) run again before the tests, never `pip install`."""
    require((SHARED / "swebench-logs").is_dir(), f"no official SWE-bench logs at {SHARED} (set HARNESS_SHARED)")
    scripts = glob.glob(str(SHARED / "swebench-logs" / "**" / "eval.sh"), recursive=True)
    marked = [open(path).read() for path in scripts]
    marked = [s for s in marked if ">>>>> Start Test Output" in s]
    assert len(marked) >= 20
    for script in marked:
        split = install_split(script)
        assert split is not None and "pip install" in split.install and "pip install" not in split.tests
        assert "conda activate testbed" in split.environment and split.tests.count("Start Test Output") == 1

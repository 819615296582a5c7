"""Environments for real projects nobody tuned the builder to, and candidates from a real history.

- tinydb from PyPI (hatchling: its editable install needs `editables`, which only the backend's
  `get_requires_for_build_editable` names): synthesized, graded gold all / empty none.
- A backend that cannot make an editable install (flit-core 3.2, before PEP 660): the project is
  installed, then its source folder put on the path in place of the installed modules.
- A project that needs Python 3.9 (`requires-python = "<3.10"`, an import Python 3.10 removed):
  built on the bullseye base (and, with `-m bases`, one that needs 3.12+ on the trixie base), its pytest from the wheelhouse, synthesized and graded; the same
  base's root filesystem runs under the local backend. It depends on a C extension published only
  as an sdist (made here, found through `--find-links`) whose backend names a requirement only when
  asked: built with the base's Python 3.9, it imports and runs in the project image.
- itsdangerous's history (../shared/git-history): `harness tasks mine --since --until` scans
  its main line, mines the one candidate and prints the funnel; the image holds the base
  commit alone.

Each builds once (wheelhouses and images are cached by content), candidates are bounded.
"""

from __future__ import annotations

import io
import json
import tarfile
import textwrap
from pathlib import Path

import pytest

from tests.cli_helpers import harness, rows_of
from tests.conftest import require
from tests.tasks.test_mine_units import GIT_HISTORY
from tests.tasks.test_synth import PACKAGE, make_package

# Each builds a real project's environment image (a minute or more; the Python 3.9 base, several).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tinydb(tmp_path_factory, docker_backend):
    from tasks.synth import synthesize

    output = tmp_path_factory.mktemp("tinydb") / "tinydb.jsonl"
    summary = synthesize(
        "tinydb==4.9.0", output, max_tasks=1, max_candidates=3, seed=0, workers=2, backend=docker_backend
    )
    return summary, rows_of(output)


def test_a_hatchling_project_gets_what_its_backend_asks_for(tinydb, docker_backend):
    from tasks.grading.grade import grade

    summary, rows = tinydb
    assert summary.kept == len(rows) == 1
    notes = rows[0]["environment"]
    assert notes["build_backend"] == "hatchling.build" and notes["install"] == "editable"
    assert any(r.startswith("editables") for r in notes["backend_asked"])
    assert any(w.startswith("editables-") for w in notes["wheels"]) and "pytest~=9.0" in notes["test_requirements"]
    assert summary.disk["environment_mb"] > 1 and 0 < summary.disk["per_task_mb"] < summary.disk["environment_mb"]
    assert grade(rows[0], rows[0]["patch"], docker_backend).resolved
    assert not grade(rows[0], "", docker_backend).resolved


def test_a_backend_without_editable_installs_gets_the_source_on_the_path(tmp_path, docker_backend):
    from sandboxes import SandboxSpec
    from tasks.synth.project_image import build_project_image
    from tasks.synth.source import fetch_project

    files = {
        **PACKAGE,
        "pyproject.toml": """\
        [build-system]
        requires = ["flit_core>=3.2,<3.3"]
        build-backend = "flit_core.buildapi"

        [project]
        name = "minicalc"
        version = "0.1.0"
        description = "a calculator"
    """,
    }
    project = fetch_project(str(make_package(tmp_path / "minicalc", files)), tmp_path / "work")
    built = build_project_image(project)
    assert built.environment["build_backend"] == "flit_core.buildapi"
    assert built.environment["install"] == "source on the path"
    check = "import importlib.metadata as m, minicalc; print(minicalc.__file__, m.version('minicalc'))"
    with docker_backend.create(SandboxSpec(image=built.image, workdir="/testbed")) as sandbox:
        result = sandbox.exec(f'python3 -c "{check}"', timeout=60)
    assert result.output.split() == ["/testbed/minicalc/__init__.py", "0.1.0"], result.output


# The Python each base test asks for: its requires-python, and an import that holds only on that Python.
PYTHONS = {
    "3.9": ("<3.10", "from collections import Mapping  # an alias Python 3.10 removed"),
    "3.13": (">=3.12", "from collections.abc import Mapping\nfrom itertools import batched  # new in Python 3.12"),
}


def versioned_package(python: str) -> dict[str, str]:
    """A project that installs and passes its tests only on `python` (of PYTHONS), with a C extension dependency."""
    requires, imports = PYTHONS[python]
    imports = textwrap.indent(imports, " " * 8).lstrip()
    return {
        "pyproject.toml": f"""\
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "oldmap"
        version = "0.1.0"
        requires-python = "{requires}"
        dependencies = ["fastsum"]  # a C extension, only an sdist (`make_c_extension_sdist`)

        [project.optional-dependencies]
        test = ["pytest>=8"]  # bullseye's own is 6.0.2, so it comes from the wheelhouse there (trixie's 8.3 serves)

        [tool.setuptools]
        packages = ["oldmap"]
    """,
        "oldmap/__init__.py": f"""\
        {imports}


        def depth(value):
            if not isinstance(value, Mapping) or not value:
                return 0
            return 1 + max(depth(item) for item in value.values())


        def flatten(value, prefix=""):
            out = {{}}
            for key, item in value.items():
                name = f"{{prefix}}.{{key}}" if prefix else key
                if isinstance(item, Mapping):
                    out.update(flatten(item, name))
                else:
                    out[name] = item
            return out
    """,
        "tests/test_oldmap.py": f"""\
        import sys

        from oldmap import depth, flatten


        def test_depth_of_a_scalar():
            assert depth(3) == 0

        def test_depth_of_nested_mappings():
            assert depth({{"a": {{"b": 1}}, "c": 2}}) == 2

        def test_depth_of_an_empty_mapping():
            assert depth({{}}) == 0

        def test_flatten_joins_keys():
            assert flatten({{"a": {{"b": 1, "c": {{"d": 2}}}}, "e": 3}}) == {{"a.b": 1, "a.c.d": 2, "e": 3}}

        def test_runs_on_its_python():
            assert sys.version_info[:2] == {tuple(int(n) for n in python.split("."))}
    """,
    }


C_EXTENSION = {
    "pyproject.toml": """\
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "backend"
        backend-path = ["_build"]
    """,
    # setuptools, plus a requirement the backend names only when asked (as meson-python names ninja and
    # scikit-build-core cmake), without which its wheel cannot be built.
    "_build/backend.py": """\
        from setuptools import build_meta
        from setuptools.build_meta import *  # noqa: F403


        def get_requires_for_build_wheel(config_settings=None):
            return build_meta.get_requires_for_build_wheel(config_settings) + ["six"]


        def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
            import six  # noqa: F401

            return build_meta.build_wheel(wheel_directory, config_settings, metadata_directory)
    """,
    "setup.py": """\
        from setuptools import Extension, setup

        setup(name="fastsum", version="0.1", ext_modules=[Extension("fastsum", ["fastsum.c"])])
    """,
    "fastsum.c": """\
        #include <Python.h>

        static PyObject *add(PyObject *self, PyObject *args) {
            long a, b;
            if (!PyArg_ParseTuple(args, "ll", &a, &b))
                return NULL;
            return PyLong_FromLong(a + b);
        }

        static PyMethodDef methods[] = {{"add", add, METH_VARARGS, "a + b"}, {NULL, NULL, 0, NULL}};
        static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "fastsum", NULL, -1, methods};

        PyMODINIT_FUNC PyInit_fastsum(void) { return PyModule_Create(&module); }
    """,
    "PKG-INFO": "Metadata-Version: 2.1\nName: fastsum\nVersion: 0.1\n",
}


def make_c_extension_sdist(folder: Path) -> Path:
    """fastsum-0.1.tar.gz in `folder`: a setuptools C extension (`fastsum.add`), no wheel of it anywhere, whose
    backend asks for `six` at build time."""
    folder.mkdir(parents=True, exist_ok=True)
    sdist = folder / "fastsum-0.1.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        for name, text in C_EXTENSION.items():
            data = textwrap.dedent(text).encode()
            info = tarfile.TarInfo(f"fastsum-0.1/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return sdist


@pytest.mark.timeout(1800)  # the first test on a fresh machine debootstraps the base and its builder
@pytest.mark.parametrize("python", ["3.9", pytest.param("3.13", marks=pytest.mark.bases)])
def test_a_project_that_needs_another_python_is_built_on_its_base(
    python, tmp_path, docker_backend, local_backend, monkeypatch
):
    from sandboxes import SandboxSpec
    from sandboxes.images import base_of
    from tasks.grading.grade import grade
    from tasks.synth import synthesize

    links = make_c_extension_sdist(tmp_path / "links").parent
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))  # where pip download and uv find the dependency
    monkeypatch.setenv("UV_FIND_LINKS", str(links))
    output = tmp_path / "oldmap.jsonl"
    summary = synthesize(
        str(make_package(tmp_path / "oldmap", versioned_package(python))),
        output,
        max_tasks=1,
        max_candidates=4,
        seed=0,
        workers=2,
        backend=docker_backend,
    )
    rows = rows_of(output)
    assert summary.kept == len(rows) == 1
    notes = rows[0]["environment"]
    requires = PYTHONS[python][0]
    assert notes["python"] == python and notes["python_chosen"] == f"requires-python {requires}; the newest that fits"
    assert notes["base_image"] == base_of(python).tag and notes["install"] == "editable"
    assert any(w.startswith("pytest-") for w in notes["wheels"])
    # bullseye's pip 20.3 is replaced from the wheelhouse; trixie's own pip serves
    assert any(w.startswith("pip-") for w in notes["wheels"]) == bool(base_of(python).pip)
    with docker_backend.create(SandboxSpec(image=rows[0]["image"], workdir="/testbed")) as sandbox:
        found = sandbox.exec(
            "python3 -c 'import pytest, sys; print(sys.version_info[:2], pytest.__version__)'", timeout=60
        )
        built = sandbox.exec("python3 -c 'import fastsum; print(fastsum.add(2, 3))'", timeout=60)
    version, pytest_version = found.output.split(")")[0], found.output.split()[-1]
    assert version == f"({python.replace('.', ', ')}" and int(pytest_version.split(".")[0]) >= 8, found.output
    tag = "cp" + python.replace(".", "")
    assert f"fastsum-0.1-{tag}-{tag}-linux_x86_64.whl" in notes["wheels"], notes["wheels"]
    assert built.output.strip() == "5", built.output
    assert grade(rows[0], rows[0]["patch"], docker_backend).resolved
    assert not grade(rows[0], "", docker_backend).resolved
    # The root filesystem the image was imported from runs under the local backend as the same base.
    with local_backend.create(SandboxSpec(image=base_of(python).tag)) as sandbox:
        assert sandbox.exec("python3 --version", timeout=60).output.strip().startswith(f"Python {python}.")


def test_mining_a_real_history_prints_the_funnel(tmp_path, docker_backend):
    from sandboxes import SandboxSpec
    from tasks.grading.grade import grade

    require(GIT_HISTORY is not None, "../shared/git-history is missing")
    output = tmp_path / "mined.jsonl"
    done = harness(
        "tasks",
        "mine",
        str(GIT_HISTORY / "itsdangerous.bundle"),
        "--since",
        "2024-04-14",
        "--until",
        "2024-04-30",
        "--limit",
        "2",
        "--output",
        str(output),
        "--backend",
        "docker",
        timeout=1500,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    funnel = json.loads(Path(f"{output}.funnel.json").read_text())
    assert funnel["counts"] == {
        "commits scanned": 8,
        "candidates": 1,
        "environment built": 1,
        "tests ran": 1,
        "FAIL_TO_PASS >= 1": 1,
        "validated": 1,
    }
    assert funnel["reasons"] == {"candidates": {"no Python change": 6, "no test change": 1}}
    assert "FAIL_TO_PASS >= 1" in done.stdout and "no Python change (6)" in done.stdout
    [instance] = rows_of(output)
    assert instance["instance_id"] == "local__itsdangerous-378" and instance["FAIL_TO_PASS"]
    assert instance["environment"]["build_backend"] == "flit_core.buildapi"
    with docker_backend.create(SandboxSpec(image=instance["image"], workdir="/testbed")) as sandbox:
        history = sandbox.exec("git log --all --format=%H", timeout=60).output.split()
    assert history == [instance["base_commit"]]
    assert grade(instance, instance["patch"], docker_backend).resolved
    assert not grade(instance, "", docker_backend).resolved

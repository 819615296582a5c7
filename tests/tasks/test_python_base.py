"""Which base a project gets: its declared Python range, then the day of its dependencies."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tasks.synth.errors import SynthError
from tasks.synth.python_base import choose_python, classified_versions, declared_python


def project(tmp_path: Path, **files: str) -> Path:
    for name, text in files.items():
        (tmp_path / name.replace("__", ".")).write_text(textwrap.dedent(text))
    return tmp_path


def test_requires_python_picks_the_bases_inside_the_range(tmp_path):
    assert choose_python(project(tmp_path, pyproject__toml='[project]\nrequires-python = "<3.10"\n')).python == "3.9"
    assert choose_python(project(tmp_path, pyproject__toml='[project]\nrequires-python = ">=3.12"\n')).python == "3.13"
    assert choose_python(project(tmp_path, pyproject__toml='[project]\nrequires-python = ">=3.8"\n')).python == "3.11"
    assert (
        choose_python(
            project(tmp_path, pyproject__toml='[project]\nrequires-python = ">=3.9.1,!=3.11.*"\n'), "2025-06-01"
        ).python
        == "3.13"
    )


def test_the_dependencies_day_picks_a_python_that_existed_then(tmp_path):
    root = project(tmp_path, pyproject__toml='[project]\nrequires-python = ">=3.7"\n')
    assert choose_python(root, "2021-03-01T10:00:00+01:00").python == "3.9"
    assert choose_python(root, "2023-01-01").python == "3.11"
    assert choose_python(root, "2026-01-01").python == "3.11"  # the default while it fits
    needs_new = project(tmp_path, pyproject__toml='[project]\nrequires-python = ">=3.12"\n')
    choice = choose_python(needs_new, "2019-01-01")  # nothing fitting existed: the oldest that fits
    assert (choice.python, choice.reason) == ("3.13", "requires-python >=3.12; the oldest that fits")


def test_every_place_a_range_is_declared(tmp_path):
    cases = {
        "pyproject__toml": ('[tool.poetry.dependencies]\npython = "^3.12"\n', ">=3.12", "3.13"),
        "setup__cfg": ("[options]\npython_requires = >=3.6, <3.10\n", ">=3.6, <3.10", "3.9"),
        "setup__py": (
            "from setuptools import setup\nPY = '~=3.13'\nsetup(name='x', python_requires=PY)\n",
            "~=3.13",
            "3.13",
        ),
        "PKG-INFO": (
            "Metadata-Version: 2.1\nName: x\nRequires-Python: <3.10\n\nRequires-Python: >=3.13\n",
            "<3.10",
            "3.9",
        ),
    }
    for i, (name, (text, declared, python)) in enumerate(cases.items()):
        (tmp_path / str(i)).mkdir()
        root = project(tmp_path / str(i), **{name: text})
        assert declared_python(root)[0] == declared, name
        assert choose_python(root).python == python, name


def test_classifiers_narrow_only_where_nothing_is_declared(tmp_path):
    classifiers = "\n".join(f"    'Programming Language :: Python :: 3.{m}'," for m in (6, 7, 8, 9))
    root = project(
        tmp_path, setup__py=f"from setuptools import setup\nsetup(name='x', classifiers=[\n{classifiers}\n])\n"
    )
    assert classified_versions(root) == ["3.6", "3.7", "3.8", "3.9"]
    assert choose_python(root).python == "3.9"
    (root / "pyproject.toml").write_text('[project]\nrequires-python = ">=3.6"\n')  # a declared range wins
    assert choose_python(root).python == "3.11"
    (root / "pyproject.toml").unlink()
    (root / "setup.py").write_text(
        "from setuptools import setup\nsetup(classifiers=['Programming Language :: Python :: 3.4'])\n"
    )
    assert choose_python(root).python == "3.11"  # no base among them: classifiers inform, they do not bind


def test_an_override_wins_and_bad_input_is_a_clear_error(tmp_path):
    root = project(tmp_path, pyproject__toml='[project]\nrequires-python = "<3.10"\n')
    assert choose_python(root, None, "3.13").python == "3.13"
    with pytest.raises(SynthError, match="no base for Python '3.8'.*3.9, 3.11, 3.13"):
        choose_python(root, None, "3.8")
    with pytest.raises(SynthError, match="needs Python <3.8 .*none fits"):
        choose_python(project(tmp_path, pyproject__toml='[project]\nrequires-python = "<3.8"\n'))
    with pytest.raises(SynthError, match="not a valid version range"):
        choose_python(project(tmp_path, pyproject__toml='[project]\nrequires-python = "three"\n'))

"""Which base (which Python) a project at a commit is built on.

The project's declared range decides what is allowed: `requires-python` (PEP 621), Poetry's
`python` dependency, `python_requires` (setup.cfg, setup.py), `Requires-Python` (an sdist's
PKG-INFO). Where none is declared, the `Programming Language :: Python :: 3.X` classifiers give
the range they list (ignored when no base falls in it: classifiers inform, they do not bind).
Among the bases allowed, the commit's date picks one that existed then: the default (3.11) when
it had been released, else the newest released before the commit (a 2021 commit gets 3.9, whose
dependencies of that day have wheels for it), else the oldest allowed (a project that needs 3.12
gets 3.13). A project whose declared range no base satisfies is a clear error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from sandboxes import SandboxError
from sandboxes.images import BASES, DEFAULT_PYTHON, base_of

from .errors import SynthError
from .metadata import read_ini, read_pyproject, setup_py_literals

CLASSIFIER = re.compile(r"Programming Language :: Python :: (3\.\d+)\s*$")


@dataclass(frozen=True)
class PythonChoice:
    python: str  # a key of sandboxes.images.BASES
    reason: str  # why, in words (recorded in the environment notes)


def choose_python(root: Path, date: str | None = None, override: str | None = None) -> PythonChoice:
    """The base's Python for the project at `root` as of `date` (ISO, the commit's; None: today)."""
    if override:
        try:
            return PythonChoice(base_of(override).python, "asked for")
        except SandboxError as err:
            raise SynthError(str(err)) from None
    declared, source = declared_python(root)
    allowed = list(BASES)
    if declared:
        try:
            specifier = SpecifierSet(declared)
        except InvalidSpecifier:
            raise SynthError(f"the project's {source} {declared!r} is not a valid version range") from None
        allowed = [
            v
            for v in BASES
            if specifier.contains(v + ".0", prereleases=True) or specifier.contains(v + ".99", prereleases=True)
        ]
        if not allowed:
            raise SynthError(
                f"the project needs Python {declared} ({source}), and the bases are Python "
                f"{', '.join(BASES)}: none fits"
            )
        why = f"{source} {declared}"
    else:
        listed = classified_versions(root)
        fitting = [v for v in BASES if listed and _minor(listed[0]) <= _minor(v) <= _minor(listed[-1])]
        allowed, why = (fitting, f"classifiers {listed[0]}-{listed[-1]}") if fitting else (allowed, "no declared range")
    existed = [v for v in allowed if date is None or BASES[v].released <= date[:10]]
    if DEFAULT_PYTHON in existed:
        return PythonChoice(DEFAULT_PYTHON, f"{why}; the default")
    if existed:
        return PythonChoice(
            existed[-1], f"{why}; the newest" + (f" released before {date[:10]}" if date else " that fits")
        )
    return PythonChoice(allowed[0], f"{why}; the oldest that fits")


def declared_python(root: Path) -> tuple[str, str]:
    """(the declared range, where it was found), or ("", "") where the project declares none."""
    project = read_pyproject(root)
    if found := project.get("project", {}).get("requires-python"):
        return found, "requires-python"
    poetry = project.get("tool", {}).get("poetry", {}).get("dependencies", {}).get("python")
    if isinstance(poetry, str) and poetry.strip() not in ("", "*"):
        return _poetry_range(poetry), "Poetry's python dependency"
    if found := read_ini(root / "setup.cfg").get("options", "python_requires", fallback="").strip():
        return found, "python_requires"
    if isinstance(found := setup_py_literals(root).get("python_requires"), str) and found.strip():
        return found.strip(), "python_requires"
    if found := _pkg_info(root).get("Requires-Python", [""])[0].strip():
        return found, "Requires-Python"
    return "", ""


def classified_versions(root: Path) -> list[str]:
    """The `Python :: 3.X` classifiers the project lists, oldest first."""
    classifiers = list(read_pyproject(root).get("project", {}).get("classifiers", []))
    classifiers += read_ini(root / "setup.cfg").get("metadata", "classifiers", fallback="").splitlines()
    if isinstance(listed := setup_py_literals(root).get("classifiers"), (list, tuple)):
        classifiers += [c for c in listed if isinstance(c, str)]
    classifiers += _pkg_info(root).get("Classifier", [])
    versions = {m.group(1) for c in classifiers if (m := CLASSIFIER.search(c.strip()))}
    return sorted(versions, key=_minor)


def _poetry_range(spec: str) -> str:
    """Poetry's `^3.8` / `~3.8` / `>=3.8,<4.0` / `3.8 || 3.9` as a PEP 440 range (lower bounds kept; `||`
    alternatives by their oldest)."""
    first = spec.split("||")[0].strip()
    first = re.sub(r"^\^\s*", ">=", first)
    first = re.sub(r"^~(?!=)\s*", ">=", first)
    return ",".join(
        part.strip() if part.strip()[0] in "<>=!~" else f"=={part.strip()}.*"
        for part in re.split(r"[,\s]+(?=[<>=!~\d])", first)
        if part.strip()
    )


def _pkg_info(root: Path) -> dict[str, list[str]]:
    path = root / "PKG-INFO"
    fields: dict[str, list[str]] = {}
    if path.exists():
        for line in path.read_text(errors="replace").split("\n\n")[0].splitlines():
            key, sep, value = line.partition(": ")
            if sep:
                fields.setdefault(key, []).append(value)
    return fields


def _minor(version: str) -> int:
    return int(version.split(".")[1])

"""The project image: the project at /testbed with its test dependencies, built offline.

Dependencies are fetched on the host (`pip download` into a wheelhouse: the build backend,
the runtime dependencies, test extras, test dependency groups and test requirement files),
sdists among them are turned into wheels there (each release once: the wheels built are kept in
a host cache for the next wheelhouse that pins it), and the image installs from that wheelhouse
with `--no-index` while the build has no network. Images and wheelhouses are cached by
content hash. Per-instance images are one small layer on top (`build_image`).

For a project at an old commit, `before` (a date) resolves the dependencies as they were on
that day (`uv pip compile --exclude-newer`), then downloads exactly those pins. Requirement
files that pin the *oldest* supported versions (`*-min.txt`, tox's lowest-versions runs) are
another set of dependencies, not this image's, and are left out.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from configparser import ConfigParser
from configparser import Error as ConfigError
from dataclasses import dataclass
from pathlib import Path

from sandboxes import SandboxError, images
from sandboxes.images import cache_dir, image_exists

from ..swe import TEST_COMMAND, WORKDIR
from .errors import SynthError
from .source import Project

log = logging.getLogger(__name__)
IMAGE_REPOSITORY = "harness-synth"
TEST_NAME = re.compile(r"test", re.IGNORECASE)
DEV_NAME = re.compile(r"(^|[-_.])dev([-_.]|$)", re.IGNORECASE)
MIN_VERSIONS_NAME = re.compile(r"(^|[-_.])(min|minimum|minimal|lowest|oldest)([-_.]|$)", re.IGNORECASE)
IMAGE_PYTHON = "3.11"  # the base image's interpreter (Debian bookworm)
DEFAULT_BUILD_REQUIRES = ["setuptools>=40.8.0", "wheel"]


@dataclass(frozen=True)
class ProjectImage:
    """The project's image (the project at /testbed, its test dependencies installed) and its test command(s)."""

    project: Project
    image: str
    test_commands: tuple[str, ...]  # the one asked for, or those to try in turn at baseline


def build_project_image(project: Project, test_command: str | None = None,
                        on_step: Callable[[str], None] = log.info, before: str | None = None) -> ProjectImage:
    """The project image (built once per content hash) and its test command(s).

    With `before` (an ISO date), dependencies are those released before it."""
    commands = (test_command,) if test_command else detect_test_commands(project.root)
    with timed(on_step, f"{project.name}: the version a checkout without .git claims"):
        version = pretend_version(project.root, before)
    wheelhouse = fetch_wheelhouse(project, on_step, before, version)
    install = install_command(project.root, version)
    digest = _hash(_tree_digest(project.root), "\n".join(sorted(p.name for p in wheelhouse.iterdir())), install,
                   _base_image())
    image = f"{IMAGE_REPOSITORY}/{project.name}-env:{digest}"
    if not image_exists(image):
        on_step(f"building the project image {image}")
        dockerfile = (f"FROM {_base_image()}\nCOPY wheelhouse /tmp/wheelhouse\nCOPY testbed {WORKDIR}\n"
                      f"WORKDIR {WORKDIR}\nRUN {install} && rm -rf /tmp/wheelhouse\n")
        with timed(on_step, f"{project.name}: docker build of the project image"):
            build_image(image, dockerfile, {"wheelhouse": wheelhouse, "testbed": project.root},
                        what=f"installing {project.name} and its test dependencies")
    return ProjectImage(project, image, commands)


def detect_test_commands(root: Path) -> tuple[str, ...]:
    """pytest on the configured test paths (or tests/, test/), then the same without addopts
    (for projects whose addopts need plugins they do not declare)."""
    if not any(_is_test_file(p) for p in root.rglob("*.py")):
        raise SynthError(f"the project has no tests: no test_*.py or *_test.py file under {root}. "
                         "Synthesis needs a test suite that exercises the code")
    paths = "" if _has_testpaths(root) else next((f" {d}" for d in ("tests", "test") if (root / d).is_dir()), "")
    command = TEST_COMMAND + paths
    return command, command + " -o addopts=''"


def _is_test_file(path: Path) -> bool:
    return path.name.startswith("test_") or path.name.endswith("_test.py")


def _has_testpaths(root: Path) -> bool:
    pyproject = _pyproject(root)
    if "testpaths" in pyproject.get("tool", {}).get("pytest", {}).get("ini_options", {}):
        return True
    for name, section in (("pytest.ini", "pytest"), ("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        config = _ini(root / name)
        if config.has_option(section, "testpaths"):
            return True
    return False


def declared_test_dependencies(root: Path) -> tuple[list[str], list[str], list[str]]:
    """(test extras, requirements from test dependency groups, test requirement files)."""
    pyproject = _pyproject(root)
    extras = list(pyproject.get("project", {}).get("optional-dependencies", {}))
    setup_cfg = _ini(root / "setup.cfg")
    if setup_cfg.has_section("options.extras_require"):
        extras += setup_cfg.options("options.extras_require")
    groups = pyproject.get("dependency-groups", {})
    requirements = [r for name in groups if TEST_NAME.search(name) for r in _group(groups, name)]
    candidates = sorted({p.relative_to(root).as_posix() for pattern in ("*requirements*.txt", "requirements/*.txt")
                         for p in root.glob(pattern) if not MIN_VERSIONS_NAME.search(p.stem)})
    files = [f for f in candidates if TEST_NAME.search(Path(f).name)]
    files = files or [f for f in candidates if DEV_NAME.search(Path(f).stem)]  # requirements-dev.txt
    return sorted({e for e in extras if TEST_NAME.search(e)}), requirements, files


def _group(groups: dict, name: str) -> list[str]:
    """A PEP 735 dependency group with its `include-group`s expanded."""
    found = []
    for item in groups.get(name, []):
        found += _group(groups, item["include-group"]) if isinstance(item, dict) else [item]
    return found


def _installable(root: Path) -> bool:
    return (root / "setup.py").exists() or bool(_pyproject(root).get("build-system") or _pyproject(root).get("project"))


def pretend_version(root: Path, before: str | None = None) -> str:
    """The version a git checkout without `.git` claims (setuptools-scm cannot see one): none for an
    sdist; with `before`, the project's last release before that date; else 0.0.0."""
    if (root / "PKG-INFO").exists():
        return ""
    name = _pyproject(root).get("project", {}).get("name") or _ini(root / "setup.cfg").get("metadata", "name", fallback="")
    if before and name:
        with tempfile.TemporaryDirectory() as scratch:
            (Path(scratch) / "wanted.in").write_text(name + "\n")
            done = _uv_compile(Path(scratch), "wanted.in", before, "--no-deps")
        pins = [line.split("==", 1)[1].strip() for line in done.stdout.splitlines() if "==" in line]
        if done.returncode == 0 and pins:
            return pins[0]
    return "0.0.0"


def install_command(root: Path, version: str | None = None) -> str:
    """The offline install run inside the image build."""
    extras, requirements, files = declared_test_dependencies(root)
    targets = [f"-e '.[{','.join(extras)}]'" if extras else "-e ."] if _installable(root) else []
    targets += [_quote(r) for r in requirements] + [f"-r {_quote(f)}" for f in files]
    version = pretend_version(root) if version is None else version
    pretend = f"SETUPTOOLS_SCM_PRETEND_VERSION={version} " if version else ""
    return (f"{pretend}python3 -m pip install -q --break-system-packages --no-cache-dir --no-index "
            f"--find-links /tmp/wheelhouse {' '.join(targets) or 'pip'}")


def fetch_wheelhouse(project: Project, on_step: Callable[[str], None] = log.info, before: str | None = None,
                     version: str | None = None) -> Path:
    """Everything the install needs, as wheels, in a folder cached by what declares it.

    With `before`, the versions are those uv resolves from releases published before that date.
    `version`: what `pretend_version` says (computed here when not given)."""
    root = project.root
    declared = [p for name in ("pyproject.toml", "setup.py", "setup.cfg", "PKG-INFO") if (p := root / name).exists()]
    extras, requirements, files = declared_test_dependencies(root)
    declared += [root / f for f in files]
    digest = _hash(sys.version.split()[0], before or "", *(p.name + "\0" + p.read_text(errors="replace") for p in declared))
    wheelhouse = cache_dir() / "synth" / "wheelhouse" / digest
    if (wheelhouse / ".complete").exists():
        return wheelhouse
    on_step(f"downloading the dependencies of {project.name} into {wheelhouse}")
    wheelhouse.mkdir(parents=True, exist_ok=True)
    build_requires = _pyproject(root).get("build-system", {}).get("requires", DEFAULT_BUILD_REQUIRES)
    targets = [f".[{','.join(extras)}]" if extras else "."] if _installable(root) else []
    targets += list(requirements) + [arg for f in files for arg in ("-r", f)]
    version = pretend_version(root, before) if version is None else version
    name = project.name
    with tempfile.TemporaryDirectory() as scratch:  # pip writes build metadata into the project
        copy = shutil.copytree(root, Path(scratch) / "project")
        if before:
            with timed(on_step, f"{name}: resolving the dependencies as of {before} (uv)"):
                build_requires = _pinned_as_of(copy, [*build_requires, *DEFAULT_BUILD_REQUIRES], before, version)
                targets = _pinned_as_of(copy, targets, before, version) if targets else []
            with timed(on_step, f"{name}: pip download of {len(build_requires) + len(targets)} pins"):
                _pip(copy, "download", "--no-deps", "-d", wheelhouse, *build_requires, *targets, version=version)
        else:
            with timed(on_step, f"{name}: pip download of the newest dependencies"):
                _pip(copy, "download", "-d", wheelhouse, *build_requires, *DEFAULT_BUILD_REQUIRES, version=version)
                if targets:
                    _pip(copy, "download", "-d", wheelhouse, *targets, version=version)
        sdists = [p for p in wheelhouse.iterdir() if p.name.endswith(SDIST_SUFFIXES)]
        unbuilt = [p for p in sdists if not _reuse_built_wheel(p, wheelhouse)]
        if unbuilt:  # one pip run: the build backends are fetched once
            with timed(on_step, f"{name}: building wheels of {', '.join(p.name for p in unbuilt)}"):
                _pip(copy, "wheel", "--no-deps", "-w", wheelhouse, *unbuilt, version=version)
            _keep_built_wheels(unbuilt, wheelhouse)
        for sdist in sdists:
            sdist.unlink()
    (wheelhouse / ".complete").write_text("")
    return wheelhouse


SDIST_SUFFIXES = (".tar.gz", ".zip", ".tar.bz2")


def _release(filename: str) -> tuple[str, str]:
    """(normalised project name, version) of an sdist or wheel file name."""
    stem = next((filename[:-len(s)] for s in (*SDIST_SUFFIXES, ".whl") if filename.endswith(s)), filename)
    name, _, version = stem.partition("-") if filename.endswith(".whl") else stem.rpartition("-")
    return re.sub(r"[-_.]+", "_", name).lower(), version.split("-")[0]


def _built_wheels() -> Path:
    """Wheels built on the host from sdists (cffi 1.15.0 for Python 3.11, ...), one folder per sdist
    and interpreter: a release built once serves every wheelhouse that pins it."""
    return cache_dir() / "synth" / "built-wheels" / f"py{sys.version_info[0]}{sys.version_info[1]}"


def _reuse_built_wheel(sdist: Path, wheelhouse: Path) -> bool:
    kept = list((_built_wheels() / sdist.name).glob("*.whl"))
    for wheel in kept:
        shutil.copy2(wheel, wheelhouse / wheel.name)
    return bool(kept)


def _keep_built_wheels(sdists: list[Path], wheelhouse: Path) -> None:
    wheels = {_release(w.name): w for w in wheelhouse.glob("*.whl")}
    for sdist in sdists:
        wheel = wheels.get(_release(sdist.name))
        if wheel is not None:
            folder = _built_wheels() / sdist.name
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copy2(wheel, folder / wheel.name)


def _pinned_as_of(project: Path, targets: list[str], before: str, version: str = "") -> list[str]:
    """`targets` (pip arguments) resolved to exact pins as of `before`, the project itself left out."""
    wanted = project / ".harness-requirements.in"
    lines, pending = [], list(targets)
    while pending:
        item = pending.pop(0)
        lines.append(f"-r {pending.pop(0)}" if item == "-r" else item)
    wanted.write_text("\n".join(lines) + "\n")
    done = _uv_compile(project, wanted.name, before, version=version)
    wanted.unlink()
    if done.returncode != 0:
        raise SynthError(f"resolving the dependencies as of {before} failed (uv pip compile): {done.stderr.strip()[-1500:]}")
    pins = [line.split(";")[0].strip() for line in done.stdout.splitlines()]
    return [pin for pin in pins if "==" in pin]


def _uv_compile(cwd: Path, wanted: str, before: str, *options: str, version: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "uv", "pip", "compile", "--quiet", "--no-header", "--no-annotate",
                           "--exclude-newer", before, "--python-version", IMAGE_PYTHON, *options, wanted],
                          cwd=cwd, capture_output=True, text=True, check=False, env=_scm_env(version))


def _scm_env(version: str) -> dict[str, str]:
    """The environment for builds of a checkout without `.git`: setuptools-scm told its version."""
    return {**os.environ, "SETUPTOOLS_SCM_PRETEND_VERSION": version} if version else dict(os.environ)


def _pip(cwd: Path, *args, version: str = "") -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          check=False, env=_scm_env(version))
    if done.returncode != 0:
        raise SynthError(f"pip {args[0]} of the project's dependencies failed: {done.stderr.strip()[-1500:]}")


# ----------------------------------------------------------------------------- images


def build_image(tag: str, dockerfile: str, files: dict[str, Path], what: str) -> None:
    """Build `dockerfile` with `files` (name in the context -> local path), offline; a failure is a SynthError."""
    try:
        images.build_image(tag, dockerfile, files, labels={"harness.synth": tag})
    except SandboxError as err:
        raise SynthError(f"{what} failed: {err}") from None


def _base_image() -> str:
    from sandboxes.images import build_base_image

    return build_base_image()


# ----------------------------------------------------------------------------- helpers


@contextmanager
def timed(on_step: Callable[[str], None], what: str) -> Iterator[None]:
    """Report how long `what` took (where mining and synthesis spend their time)."""
    started = time.monotonic()
    try:
        yield
    finally:
        on_step(f"{what}: {time.monotonic() - started:.0f}s")


def _pyproject(root: Path) -> dict:
    path = root / "pyproject.toml"
    try:
        return tomllib.loads(path.read_text()) if path.exists() else {}
    except tomllib.TOMLDecodeError as err:
        raise SynthError(f"{path} is not valid TOML: {err}") from None


def _ini(path: Path) -> ConfigParser:
    config = ConfigParser(interpolation=None)
    if path.exists():
        try:
            config.read(path)
        except (ConfigError, UnicodeDecodeError) as err:  # a broken file is just skipped
            log.warning("cannot read %s: %s", path, err)
    return config


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _hash(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]

"""The environment image: the project at /testbed with its test dependencies, built offline.

Dependencies are fetched on the host (`pip download` into a wheelhouse: the build backend,
the runtime dependencies, test extras, test dependency groups and test requirement files),
sdists among them are turned into wheels there, and the image installs from that wheelhouse
with `--no-index` while the build has no network. Images and wheelhouses are cached by
content hash. Per-instance images are one small layer on top (`build_image`).
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable
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
DEFAULT_BUILD_REQUIRES = ["setuptools>=40.8.0", "wheel"]


@dataclass(frozen=True)
class ProjectImage:
    """The project's image (the project at /testbed, its test dependencies installed) and its test command(s)."""

    project: Project
    image: str
    test_commands: tuple[str, ...]  # the one asked for, or those to try in turn at baseline


def build_project_image(project: Project, test_command: str | None = None,
                      on_step: Callable[[str], None] = log.info) -> ProjectImage:
    """The project's environment image (built once per content hash) and its test command(s)."""
    commands = (test_command,) if test_command else detect_test_commands(project.root)
    wheelhouse = fetch_wheelhouse(project, on_step)
    install = install_command(project.root)
    digest = _hash(_tree_digest(project.root), "\n".join(sorted(p.name for p in wheelhouse.iterdir())), install,
                   _base_image())
    image = f"{IMAGE_REPOSITORY}/{project.name}-env:{digest}"
    if not image_exists(image):
        on_step(f"building the environment image {image}")
        dockerfile = (f"FROM {_base_image()}\nCOPY wheelhouse /tmp/wheelhouse\nCOPY testbed {WORKDIR}\n"
                      f"WORKDIR {WORKDIR}\nRUN {install} && rm -rf /tmp/wheelhouse\n")
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
    files = sorted({p.relative_to(root).as_posix() for pattern in ("*requirements*.txt", "requirements/*.txt")
                    for p in root.glob(pattern) if TEST_NAME.search(p.name)})
    return sorted({e for e in extras if TEST_NAME.search(e)}), requirements, files


def _group(groups: dict, name: str) -> list[str]:
    """A PEP 735 dependency group with its `include-group`s expanded."""
    found = []
    for item in groups.get(name, []):
        found += _group(groups, item["include-group"]) if isinstance(item, dict) else [item]
    return found


def _installable(root: Path) -> bool:
    return (root / "setup.py").exists() or bool(_pyproject(root).get("build-system") or _pyproject(root).get("project"))


def install_command(root: Path) -> str:
    """The offline install run inside the image build."""
    extras, requirements, files = declared_test_dependencies(root)
    targets = [f"-e '.[{','.join(extras)}]'" if extras else "-e ."] if _installable(root) else []
    targets += [_quote(r) for r in requirements] + [f"-r {_quote(f)}" for f in files]
    pretend = "" if (root / "PKG-INFO").exists() else "SETUPTOOLS_SCM_PRETEND_VERSION=0.0.0 "
    return (f"{pretend}python3 -m pip install -q --break-system-packages --no-cache-dir --no-index "
            f"--find-links /tmp/wheelhouse {' '.join(targets) or 'pip'}")


def fetch_wheelhouse(project: Project, on_step: Callable[[str], None] = log.info) -> Path:
    """Everything the install needs, as wheels, in a folder cached by what declares it."""
    root = project.root
    declared = [p for name in ("pyproject.toml", "setup.py", "setup.cfg", "PKG-INFO") if (p := root / name).exists()]
    extras, requirements, files = declared_test_dependencies(root)
    declared += [root / f for f in files]
    digest = _hash(sys.version.split()[0], *(p.name + "\0" + p.read_text(errors="replace") for p in declared))
    wheelhouse = cache_dir() / "synth" / "wheelhouse" / digest
    if (wheelhouse / ".complete").exists():
        return wheelhouse
    on_step(f"downloading the dependencies of {project.name} into {wheelhouse}")
    wheelhouse.mkdir(parents=True, exist_ok=True)
    build_requires = _pyproject(root).get("build-system", {}).get("requires", DEFAULT_BUILD_REQUIRES)
    targets = [f".[{','.join(extras)}]" if extras else "."] if _installable(root) else []
    targets += list(requirements) + [arg for f in files for arg in ("-r", f)]
    with tempfile.TemporaryDirectory() as scratch:  # pip writes build metadata into the project
        copy = shutil.copytree(root, Path(scratch) / "project")
        _pip(copy, "download", "-d", wheelhouse, *build_requires, *DEFAULT_BUILD_REQUIRES)
        if targets:
            _pip(copy, "download", "-d", wheelhouse, *targets)
        for sdist in [p for p in wheelhouse.iterdir() if p.name.endswith((".tar.gz", ".zip", ".tar.bz2"))]:
            _pip(copy, "wheel", "--no-deps", "-w", wheelhouse, sdist)
            sdist.unlink()
    (wheelhouse / ".complete").write_text("")
    return wheelhouse


def _pip(cwd: Path, *args) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          check=False)
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

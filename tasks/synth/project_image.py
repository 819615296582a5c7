"""The project image: the project at /testbed with its test dependencies, built offline.

Dependencies are fetched on the host (`pip download` into a wheelhouse: the build backend and
what it asks for (`build_backend`), the runtime dependencies, test extras, test dependency groups
and test requirement files), sdists among them are turned into wheels for the base's Python
(`wheels`), and the image installs from that wheelhouse with `--no-index` while the build has no
network: an editable install where the backend can make one, else a regular install with the
installed modules replaced by the source folder on the path (`source_on_path.py`). What was done
is the image's `environment` notes (each instance carries them): the backend and its requirements,
the install, the extras, groups and files, and every wheel by name and version, so a rebuild
installs the same. Images and wheelhouses are cached by content hash. Per-instance images are one
small layer on top (`build_image`).

For a project at an old commit, `before` (a date) resolves the dependencies as they were on
that day (`uv pip compile --exclude-newer`), then downloads exactly those pins. Requirement
files that pin the *oldest* supported versions (`*-min.txt`, tox's lowest-versions runs) are
another set of dependencies, not this image's, and are left out. Where the exact pins of the test
requirements (a pip-compile lock such as trio's test-requirements.txt) cannot all be had (a
release the index lacks, or one that does not support the base's Python), the image is built once
more with those pins loosened to the names, and the notes say which.

Here: the test commands, the test dependencies the project declares, the wheelhouse, the install
command, the image and its notes. pip and uv on the host (downloads for a base's Python, pins as
of a date) are in `host_pip`; sdists turned into wheels, and the cache of those built, in `wheels`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from configparser import ConfigParser
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet

from sandboxes import SandboxError, images
from sandboxes.images import (
    DEFAULT_PYTHON,
    Base,
    base_of,
    build_base_image,
    cache_dir,
    image_exists,
)

from ..swe import TEST_COMMAND, WORKDIR
from .build_backend import DEFAULT_BUILD_REQUIRES, BackendNeeds, ask_backend, declared_backend, scm_env
from .errors import SynthError
from .host_pip import for_python, host_python, pinned, pip, quote, tail, timed, uv_compile
from .metadata import read_ini, read_pyproject, setup_py_literals
from .python_base import choose_python
from .source import Project
from .wheels import build_wheels

log = logging.getLogger(__name__)
IMAGE_REPOSITORY = "harness-synth"
TEST_NAME = re.compile(r"test", re.IGNORECASE)
DEV_NAME = re.compile(r"(^|[-_.])dev([-_.]|$)", re.IGNORECASE)
MIN_VERSIONS_NAME = re.compile(r"(^|[-_.])(min|minimum|minimal|lowest|oldest)([-_.]|$)", re.IGNORECASE)
# In a dev dependency group or requirements file (taken where nothing names tests): what only builds
# docs, lints or publishes, left out.
NOT_FOR_TESTS = re.compile(
    r"^(sphinx|mkdocs|furo|myst|pydata-sphinx|coveralls|codecov|pre-commit|tox|nox|twine|build"
    r"|black|ruff|isort|pylint|flake8|mypy|pyright|types-|bump|towncrier|ipython|jupyter)",
    re.IGNORECASE,
)
SOURCE_ON_PATH = Path(__file__).with_name("source_on_path.py")
PLAN = ".environment.json"  # in the wheelhouse: what the backend needs (written with the wheelhouse)


@dataclass(frozen=True)
class ProjectImage:
    """The project's image (the project at /testbed, its test dependencies installed) and its test command(s)."""

    project: Project
    image: str
    test_commands: tuple[str, ...]  # the one asked for, or those to try in turn at baseline
    environment: dict = field(default_factory=dict)  # how it was built (`environment_notes`)


def build_project_image(
    project: Project,
    test_command: str | None = None,
    on_step: Callable[[str], None] = log.info,
    before: str | None = None,
    python: str | None = None,
) -> ProjectImage:
    """The project image (built once per content hash) and its test command(s).

    With `before` (an ISO date), dependencies are those released before it. The base is `python`
    where given, else the one `choose_python` picks for the project as of `before` (the Python of
    the dependencies' day; the newest dependencies get today's choice). Where that fails and test
    requirements are pinned to exact versions, it is built again with those pins loosened."""
    try:
        return _build_project_image(project, test_command, on_step, before, python, loose=False)
    except SynthError as err:
        if not pinned_test_requirements(project.root):
            raise
        on_step(
            f"{project.name}: with its test requirements' exact pins the environment failed ({tail(err)}); loosening them"
        )
        return _build_project_image(project, test_command, on_step, before, python, loose=True)


def python_project_image(
    project: Project, test_command: str | None, on_step: Callable[[str], None], python: str | None = None
) -> ProjectImage:
    """The project image with the newest dependencies, else with those released before the project's date."""
    try:
        return build_project_image(project, test_command, on_step, python=python)
    except SynthError as err:
        if not project.date:
            raise
        on_step(f"the newest dependencies failed ({tail(err)}); trying those released before {project.date}")
        return build_project_image(project, test_command, on_step, before=project.date, python=python)


def _build_project_image(
    project: Project,
    test_command: str | None,
    on_step: Callable[[str], None],
    before: str | None,
    python: str | None,
    loose: bool,
) -> ProjectImage:
    commands = (test_command,) if test_command else detect_test_commands(project.root)
    choice = choose_python(project.root, before, python)
    base = base_of(choice.python)
    on_step(f"{project.name}: Python {choice.python} ({choice.reason})")
    with timed(on_step, f"{project.name}: the version a checkout without .git claims"):
        version = pretend_version(project.root, before, base.python)
    wheelhouse = fetch_wheelhouse(project, on_step, before, version, base, loose)
    needs = BackendNeeds(**json.loads((wheelhouse / PLAN).read_text()))
    install = install_command(project.root, version, needs.editable, base, loose)
    with timed(on_step, f"the Python {base.python} base image"):
        base_image = build_base_image(base.recipe, on_step)
    digest = _hash(  # the script the install runs is part of the image: a changed script builds anew
        _tree_digest(project.root),
        "\n".join(sorted(p.name for p in wheelhouse.iterdir())),
        install,
        base_image,
        SOURCE_ON_PATH.read_text(),
    )
    image = f"{IMAGE_REPOSITORY}/{project.name}-env:{digest}"
    if not image_exists(image):
        on_step(f"building the project image {image}")
        dockerfile = (
            f"FROM {base_image}\nCOPY wheelhouse /tmp/wheelhouse\nCOPY {SOURCE_ON_PATH.name} /tmp/\n"
            f"COPY testbed {WORKDIR}\nWORKDIR {WORKDIR}\n"
            f"RUN {install} && rm -rf /tmp/wheelhouse /tmp/{SOURCE_ON_PATH.name}\n"
        )
        with timed(on_step, f"{project.name}: docker build of the project image"):
            build_image(
                image,
                dockerfile,
                {"wheelhouse": wheelhouse, "testbed": project.root, SOURCE_ON_PATH.name: SOURCE_ON_PATH},
                what=f"installing {project.name} and its test dependencies",
            )
    notes = environment_notes(project.root, wheelhouse, needs, install, before, loose)
    return ProjectImage(
        project,
        image,
        commands,
        {"python": base.python, "python_chosen": choice.reason, "base_image": base_image, **notes},
    )


def environment_notes(
    root: Path, wheelhouse: Path, needs: BackendNeeds, install: str, before: str | None, loose: bool = False
) -> dict:
    """What the image holds and how it was made: enough to build the same one again (with its base's
    Python, which `build_project_image` adds)."""
    extras, requirements, files = declared_test_dependencies(root)
    return {
        "build_backend": needs.backend,
        "build_requires": needs.requires,
        "backend_asked": needs.asked,
        "install": "editable" if needs.editable else "source on the path",
        **({"backend_problem": needs.problem} if needs.problem else {}),
        "test_extras": extras,
        "test_requirements": requirements,
        "test_requirement_files": files,
        **({"test_pins_loosened": pinned_test_requirements(root)} if loose else {}),
        "dependencies": f"released before {before}" if before else "newest",
        "wheels": sorted(p.name for p in wheelhouse.glob("*.whl")),
        "install_command": install,
    }


def detect_test_commands(root: Path) -> tuple[str, ...]:
    """pytest on the configured test paths (or the first of tests/, test/ that holds test files; else
    pytest's own discovery from the root, for tests inside the package such as trio's src/trio/_tests),
    then the same without addopts (for projects whose addopts need plugins they do not declare)."""
    if not any(_is_test_file(p) for p in root.rglob("*.py")):
        raise SynthError(
            f"the project has no tests: no test_*.py or *_test.py file under {root}. "
            "Synthesis needs a test suite that exercises the code"
        )
    paths = "" if _has_testpaths(root) else next((f" {d}" for d in ("tests", "test") if _holds_tests(root / d)), "")
    command = TEST_COMMAND + paths
    return command, command + " -o addopts=''"


def _holds_tests(folder: Path) -> bool:
    return folder.is_dir() and any(_is_test_file(p) for p in folder.rglob("*.py"))


def _is_test_file(path: Path) -> bool:
    return path.name.startswith("test_") or path.name.endswith("_test.py")


def _has_testpaths(root: Path) -> bool:
    pyproject = read_pyproject(root)
    if "testpaths" in pyproject.get("tool", {}).get("pytest", {}).get("ini_options", {}):
        return True
    for name, section in (("pytest.ini", "pytest"), ("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        config = read_ini(root / name)
        if config.has_option(section, "testpaths"):
            return True
    return False


def declared_test_dependencies(root: Path) -> tuple[list[str], list[str], list[str]]:
    """(test extras, requirements from test dependency groups, test requirement files).

    Groups are PEP 735 `[dependency-groups]`, Poetry's groups and dev-dependencies, PDM's
    dev-dependencies and Hatch's environments; those named for tests, else the dev ones (less
    what only builds docs or lints)."""
    pyproject = read_pyproject(root)
    extras = list(pyproject.get("project", {}).get("optional-dependencies", {}))
    setup_cfg = read_ini(root / "setup.cfg")
    if setup_cfg.has_section("options.extras_require"):
        extras += setup_cfg.options("options.extras_require")
    groups = _dependency_groups(pyproject)
    extras += _setup_py_keywords(root)[0]
    if tests_require := _setup_py_keywords(root)[1] + _ini_list(setup_cfg, "options", "tests_require"):
        groups["tests_require"] = tests_require
    chosen = [n for n in groups if TEST_NAME.search(n)] or [
        n for n in groups if DEV_NAME.search(n) or n.endswith("default")
    ]
    requirements = list(
        dict.fromkeys(
            r for name in chosen for r in groups[name] if TEST_NAME.search(name) or not NOT_FOR_TESTS.match(r)
        )
    )
    candidates = sorted(
        {
            p.relative_to(root).as_posix()
            for pattern in ("*requirements*.txt", "requirements/*.txt")
            for p in root.glob(pattern)
            if not MIN_VERSIONS_NAME.search(p.stem)
        }
    )
    files = [f for f in candidates if TEST_NAME.search(Path(f).name)]
    files = files or [f for f in candidates if DEV_NAME.search(Path(f).stem)]  # requirements-dev.txt
    return sorted({e for e in extras if TEST_NAME.search(e)}), requirements, files


def _test_requirements(root: Path, requirements: list[str], files: list[str], loose: bool = False) -> list[str]:
    """The test requirements from groups and from requirement files, one per distribution: a requirement
    file's line wins over a group's (requests pins pytest-httpbin 0.0.7 in setup.py's tests_require and 1.0.0
    in requirements-dev.txt; asking for both resolves nothing). `loose`: exact pins (`==`) become the name."""
    chosen: dict[str, str] = {}
    for requirement in [*requirements, *(r for f in files for r in requirement_file_lines(root, f))]:
        chosen[_distribution(requirement)] = _unpinned(requirement) if loose else requirement
    return list(chosen.values())


def pinned_test_requirements(root: Path) -> list[str]:
    """The test requirements pinned to one version (`name==1.2.3`), which `loose` builds take by name."""
    _, requirements, files = declared_test_dependencies(root)
    return [r for r in _test_requirements(root, requirements, files) if _unpinned(r) != r]


def _unpinned(line: str) -> str:
    """A requirement without its exact-version specifiers (`==`, `===`); the line as it is where it has none
    or is not a PEP 508 requirement (a URL, a path)."""
    try:
        requirement = Requirement(line)
    except InvalidRequirement:
        return line
    kept = [spec for spec in requirement.specifier if spec.operator not in ("==", "===")]
    if len(kept) == len(requirement.specifier):
        return line
    requirement.specifier = SpecifierSet(",".join(str(spec) for spec in kept))
    return str(requirement)


def _distribution(requirement: str) -> str:
    """The normalized distribution name a requirement line starts with (PEP 503)."""
    name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    return re.sub(r"[-_.]+", "-", name.group(1)).lower() if name else requirement


def requirement_file_lines(root: Path, name: str, seen: frozenset = frozenset()) -> list[str]:
    """The requirements a requirements file names (its `-r` includes followed), less the project
    itself (`-e .`, `name @ file:.`: the image installs it once, editable) and pip options."""
    path = (root / name).resolve()
    if path in seen or not path.is_file() or not path.is_relative_to(root.resolve()):
        return []
    text = re.sub(r"\\\n", " ", path.read_text(errors="replace"))  # continuation lines
    found = []
    for line in text.splitlines():
        line = re.sub(r"(^|\s)#.*", "", line).strip()
        include = re.match(r"^(-r|--requirement)[\s=]+(\S+)", line)
        if include:
            found += requirement_file_lines(
                root, path.parent.relative_to(root.resolve()).joinpath(include.group(2)).as_posix(), seen | {path}
            )
        elif line and not line.startswith(("-", ".", "/")) and "file:" not in line:
            found.append(re.split(r"\s+--", line)[0].strip())  # --hash=... options left out
    return found


def _setup_py_keywords(root: Path) -> tuple[list[str], list[str]]:
    """(extras, tests_require) a setup.py passes to `setup()` as literals (or names bound to literals)."""
    literals = setup_py_literals(root)
    extras, tests = literals.get("extras_require"), literals.get("tests_require")
    return (
        [k for k in extras if isinstance(k, str)] if isinstance(extras, dict) else [],
        [r for r in tests if isinstance(r, str)] if isinstance(tests, (list, tuple)) else [],
    )


def _ini_list(config: ConfigParser, section: str, option: str) -> list[str]:
    return [line.strip() for line in config.get(section, option, fallback="").splitlines() if line.strip()]


def _dependency_groups(pyproject: dict) -> dict[str, list[str]]:
    """Every named group of requirements the project declares for development, as PEP 508 strings."""
    tool = pyproject.get("tool", {})
    pep735 = pyproject.get("dependency-groups", {})
    found = {name: _group(pep735, name) for name in pep735}
    poetry = tool.get("poetry", {})
    for name, table in [
        ("dev", poetry.get("dev-dependencies", {})),
        *((n, g.get("dependencies", {})) for n, g in poetry.get("group", {}).items()),
    ]:
        found.setdefault(f"poetry-{name}", []).extend(
            _poetry_requirement(k, v) for k, v in table.items() if k != "python"
        )
    for name, items in tool.get("pdm", {}).get("dev-dependencies", {}).items():
        found.setdefault(f"pdm-{name}", []).extend(i for i in items if not i.startswith("-e"))
    for name, env in tool.get("hatch", {}).get("envs", {}).items():
        found.setdefault(f"hatch-{name}", []).extend(env.get("dependencies", []) + env.get("extra-dependencies", []))
    return {name: items for name, items in found.items() if items}


def _poetry_requirement(name: str, spec) -> str:
    """A Poetry dependency as a PEP 508 requirement (`^1.2` -> `>=1.2`); its extras kept, its source not."""
    version = spec.get("version", "*") if isinstance(spec, dict) else str(spec)
    extras = f"[{','.join(spec['extras'])}]" if isinstance(spec, dict) and spec.get("extras") else ""
    version = re.sub(r"^[\^~](?!=)", ">=", version.strip())
    return f"{name}{extras}" + ("" if version in ("*", "") else version if version[0] in "<>=!~" else f"=={version}")


def _group(groups: dict, name: str) -> list[str]:
    """A PEP 735 dependency group with its `include-group`s expanded."""
    found = []
    for item in groups.get(name, []):
        found += _group(groups, item["include-group"]) if isinstance(item, dict) else [item]
    return found


def _installable(root: Path) -> bool:
    return (root / "setup.py").exists() or bool(
        read_pyproject(root).get("build-system") or read_pyproject(root).get("project")
    )


def pretend_version(root: Path, before: str | None = None, python: str = DEFAULT_PYTHON) -> str:
    """The version a git checkout without `.git` claims (setuptools-scm cannot see one): none for an
    sdist; with `before`, the project's last release before that date; else 0.0.0."""
    if (root / "PKG-INFO").exists():
        return ""
    name = read_pyproject(root).get("project", {}).get("name") or read_ini(root / "setup.cfg").get(
        "metadata", "name", fallback=""
    )
    if before and name:
        with tempfile.TemporaryDirectory() as scratch:
            (Path(scratch) / "wanted.in").write_text(name + "\n")
            done = uv_compile(Path(scratch), "wanted.in", before, python, "--no-deps")
        pins = [line.split("==", 1)[1].strip() for line in done.stdout.splitlines() if "==" in line]
        if done.returncode == 0 and pins:
            return pins[0]
    return "0.0.0"


def install_command(
    root: Path, version: str | None = None, editable: bool = True, base: Base | None = None, loose: bool = False
) -> str:
    """The offline install run inside the image build: editable, or (where the backend cannot make an
    editable install) regular with the source put on the path afterwards. On a base whose own pip will
    not do (`Base.pip`), that pip is installed from the wheelhouse first. `loose`: see `_test_requirements`."""
    extras, requirements, files = declared_test_dependencies(root)
    project = f"'.[{','.join(extras)}]'" if extras else "."
    targets = [f"-e {project}" if editable else project] if _installable(root) else []
    targets += [quote(r) for r in _test_requirements(root, requirements, files, loose)]
    version = pretend_version(root) if version is None else version
    pretend = f"SETUPTOOLS_SCM_PRETEND_VERSION={version} " if version else ""
    command = (
        f"python3 -m pip install -q --no-index --find-links /tmp/wheelhouse {quote(base.pip)} && "
        if base is not None and base.pip
        else ""
    )
    command += (
        f"{pretend}python3 -m pip install -q --break-system-packages --no-cache-dir --no-index "
        f"--find-links /tmp/wheelhouse {' '.join(targets) or 'pip'}"
    )
    if not editable and _installable(root):
        command += f" && python3 /tmp/{SOURCE_ON_PATH.name} {quote(distribution_name(root))} {WORKDIR}"
    return command


def distribution_name(root: Path) -> str:
    """The project's distribution name as its metadata declares it (PEP 621, Poetry, flit, setup.cfg)."""
    pyproject = read_pyproject(root)
    tool = pyproject.get("tool", {})
    flit = tool.get("flit", {}).get("metadata", {})
    return (
        pyproject.get("project", {}).get("name")
        or tool.get("poetry", {}).get("name")
        or flit.get("dist-name")
        or flit.get("module")
        or read_ini(root / "setup.cfg").get("metadata", "name", fallback="")
        or root.name
    )


def fetch_wheelhouse(
    project: Project,
    on_step: Callable[[str], None] = log.info,
    before: str | None = None,
    version: str | None = None,
    base: Base | None = None,
    loose: bool = False,
) -> Path:
    """Everything the install needs, as wheels for the base's Python, in a folder cached by what declares it.

    With `before`, the versions are those uv resolves from releases published before that date; for a
    base whose Python is not the host's, uv resolves for that Python and exactly those pins are
    downloaded (`pip download --python-version`). `version`: what `pretend_version` says (computed
    here when not given)."""
    root = project.root
    base = base or base_of(DEFAULT_PYTHON)
    python = base.python
    declared = [p for name in ("pyproject.toml", "setup.py", "setup.cfg", "PKG-INFO") if (p := root / name).exists()]
    extras, requirements, files = declared_test_dependencies(root)
    declared += [root / f for f in files]
    wanted = _test_requirements(root, requirements, files, loose)  # what is read from the files counts too
    digest = _hash(
        PLAN,
        sys.version.split()[0],
        python,
        # For another Python, sdists that are not pure Python are built by that Python (`wheels.build_wheels`):
        # wheelhouses from before, holding the host's builds, are not reused.
        "built in the base" if python != host_python() else "",
        base.pip,
        before or "",
        *extras,
        *wanted,
        *(p.name + "\0" + p.read_text(errors="replace") for p in declared),
    )
    wheelhouse = cache_dir() / "synth" / "wheelhouse" / digest
    if (wheelhouse / ".complete").exists():
        return wheelhouse
    on_step(f"downloading the dependencies of {project.name} for Python {python} into {wheelhouse}")
    wheelhouse.mkdir(parents=True, exist_ok=True)
    system = read_pyproject(root).get("build-system", {})
    build_requires = declared_backend(system)[1]
    targets = [f".[{','.join(extras)}]" if extras else "."] if _installable(root) else []
    targets += wanted
    version = pretend_version(root, before, python) if version is None else version
    name = project.name
    exact = bool(before) or python != host_python()
    with tempfile.TemporaryDirectory() as scratch:  # pip writes build metadata into the project
        copy = shutil.copytree(root, Path(scratch) / "project")
        if exact:
            with timed(
                on_step,
                f"{name}: resolving the dependencies for Python {python}"
                + (f" as of {before}" if before else "")
                + " (uv)",
            ):
                build_requires = pinned(copy, [*build_requires, *DEFAULT_BUILD_REQUIRES], before, python, version)
                targets = pinned(copy, targets, before, python, version) if targets else []
            with timed(on_step, f"{name}: pip download of {len(build_requires) + len(targets)} pins"):
                pip(
                    copy,
                    "download",
                    "--no-deps",
                    *for_python(python),
                    "-d",
                    wheelhouse,
                    *build_requires,
                    *targets,
                    version=version,
                )
        else:
            with timed(on_step, f"{name}: pip download of the newest dependencies"):
                pip(copy, "download", "-d", wheelhouse, *build_requires, *DEFAULT_BUILD_REQUIRES, version=version)
                if targets:
                    pip(copy, "download", "-d", wheelhouse, *targets, version=version)
        if base.pip:  # the installer, not a dependency: the newest that fits, whatever the date
            pip(copy, "download", "--no-deps", *for_python(python), "-d", wheelhouse, base.pip, version=version)
        needs = _backend_needs(copy, system, wheelhouse, before, python, version, on_step)
        build_wheels(copy, name, wheelhouse, base, before, version, on_step)
    (wheelhouse / PLAN).write_text(json.dumps(asdict(needs), indent=1))
    (wheelhouse / ".complete").write_text("")
    return wheelhouse


def _backend_needs(
    project: Path,
    system: dict,
    wheelhouse: Path,
    before: str | None,
    python: str,
    version: str,
    on_step: Callable[[str], None],
) -> BackendNeeds:
    """Ask the backend what else it needs (`build_backend.ask_backend`) and download that too."""
    with timed(on_step, f"asking the build backend ({declared_backend(system)[0]}) what it needs"):
        needs = ask_backend(project, system, wheelhouse, scm_env(version))
    if needs.problem:
        on_step(f"the build backend could not be asked (the install will show what is missing): {needs.problem}")
    elif needs.asked:
        if before or python != host_python():
            pip(
                project,
                "download",
                "--no-deps",
                *for_python(python),
                "-d",
                wheelhouse,
                *pinned(project, needs.asked, before, python, version),
                version=version,
            )
        else:
            pip(project, "download", "-d", wheelhouse, *needs.asked, version=version)
    return needs


# ----------------------------------------------------------------------------- images


def build_image(tag: str, dockerfile: str, files: dict[str, Path], what: str) -> None:
    """Build `dockerfile` with `files` (name in the context -> local path), offline; a failure is a SynthError."""
    try:
        images.build_image(tag, dockerfile, files, labels={"harness.synth": tag})
    except SandboxError as err:
        raise SynthError(f"{what} failed: {err}") from None


# ----------------------------------------------------------------------------- helpers


def _tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _hash(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]

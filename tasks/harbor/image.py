"""A Harbor task's image, built here without a registry: `environment/Dockerfile` with its context `environment/`.

Harbor builds the Dockerfile as it is, with a network. Here the build has none, so what it would fetch is
had ahead, the way this project's other images are made:

- each `FROM` that the Docker engine does not hold is replaced by its stand-in (`sandboxes.standins`): a
  Debian base of this project's own, recorded as `base_substituted`;
- the Debian packages that the Dockerfile's `RUN` steps and `tests/test.sh` install (`apt-get install X`) are
  installed into that stand-in ahead (it has no apt sources, so the same `apt-get` lines succeed offline);
- the Python packages they install (`pip install X`, `uv pip install X`, `uvx --with X`, `-r FILE`) are
  downloaded on the host into a wheelhouse (wheels only) that the image holds at /opt/harness-wheelhouse,
  with pip and uv told to install from it (`PIP_NO_INDEX`, `PIP_FIND_LINKS`, `UV_NO_INDEX`,
  `UV_FIND_LINKS`): the Dockerfile's steps and the verifier's installs then run as written;
- /logs/agent, /logs/verifier, /tests and /solution are made, writable by any user (Harbor mounts or copies
  them in as root);
- what `tests/test.sh` installs at run time is also installed into the image at its end, and uv's curl
  installer (`astral.sh/uv/...`) is stood in for by the `uv` package and the `~/.local/bin/env` it writes.

Anything else the build or the tests fetch (curl downloads, npm, git clones) fails offline: the build's error
is the task's error. One image per task, tagged by the hash of everything that goes into it, built once.
"""

from __future__ import annotations

import hashlib
import logging
import base64
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from sandboxes import SandboxError
from sandboxes.images import (
    BASE_REPOSITORY,
    build_base_image,
    build_image,
    cache_dir,
    image_exists,
    image_size,
    recipe_hash,
)
from .. import languages  # noqa: F401  (each language registers its toolchain's stand-ins on import)
from sandboxes.standins import StandIn, check_apt_packages, standin_for, standin_recipe

from .config import HarborTaskDir, HarborTaskError
from .verify import LOGS, SOLUTION_DIR, TESTS_DIR, VERIFIER_DIR

log = logging.getLogger(__name__)
IMAGE_REPOSITORY = "harness-harbor"
WHEELHOUSE = "/opt/harness-wheelhouse"
CONTEXT_WHEELHOUSE = ".harness-wheelhouse"
RECIPE = 1  # bump when the image's making changes
OFFLINE_PIP = (
    f"PIP_NO_INDEX=1 PIP_FIND_LINKS={WHEELHOUSE} UV_NO_INDEX=1 UV_OFFLINE=1 UV_FIND_LINKS={WHEELHOUSE} "
    "PIP_BREAK_SYSTEM_PACKAGES=1 UV_BREAK_SYSTEM_PACKAGES=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore "
    # A stand-in holds Debian's pytest and friends, which pip cannot uninstall (no RECORD); the public images hold
    # none, so an install there never uninstalls: install over them.
    "PIP_IGNORE_INSTALLED=1"
)
UV_ENV_SCRIPT = 'export PATH="$HOME/.local/bin:$PATH"'
PIP_VALUE_OPTIONS = {
    "-c", "--constraint", "-i", "--index-url", "--extra-index-url", "-f", "--find-links", "-t", "--target",
    "--prefix", "--root", "--python", "-p", "--platform", "--python-version", "--implementation", "--abi",
    "--src", "--cache-dir", "--trusted-host", "--progress-bar", "--upgrade-strategy", "--log", "--timeout",
    "--retries", "--only-binary", "--no-binary", "--index", "--default-index",
}  # fmt: skip
APT_VALUE_OPTIONS = {"-o", "-t", "--target-release", "-c", "--config-file"}
SEPARATORS = re.compile(r"&&|\|\||;|\||\n")
# `> /dev/null`, `2>&1`, `< file` (not the `>=` of a requirement such as `'six>=1'`)
REDIRECTION = re.compile(r"(?:(?<=\s)|^)\d*(>>?|<)&?\s*[^\s;&|]+", re.MULTILINE)
LOOPBACK = re.compile(r"^https?://(localhost|127\.0\.0\.1|\[::1\]|0\.0\.0\.0)([:/]|$)")
COMMAND_PREFIXES = {"sudo", "env", "exec", "time", "if", "then", "else", "elif", "do", "while", "until", "!", "{", "("}
HEREDOC = re.compile(r"<<(?P<strip>-?)\s*(?P<quote>['\"]?)(?P<word>\w+)(?P=quote)")
HEREDOC_FILE = "/tmp/.harness-heredoc"
UV_INSTALLER = re.compile(r"astral\.sh/uv/(?:(\d+\.\d+\.\d+)/)?install\.sh")


@dataclass
class Installs:
    """What a shell script installs: Debian packages, Python requirements, and uv through its installer."""

    apt: list[str] = field(default_factory=list)
    pip: list[str] = field(default_factory=list)
    uv: str | None = None  # a requirement for uv ("uv" or "uv==0.9.5") where the script runs uv's installer
    local: bool = False  # a local project or file is pip-installed: it needs setuptools and wheel
    fetches: list[str] = field(default_factory=list)  # other downloads (curl, wget, git clone, npm): no stand-in

    def add(self, other: "Installs") -> None:
        self.apt += [p for p in other.apt if p not in self.apt]
        self.pip += [r for r in other.pip if r not in self.pip]
        self.uv = self.uv or other.uv
        self.local = self.local or other.local
        self.fetches += other.fetches


@dataclass(frozen=True)
class TaskImage:
    image: str
    workdir: str  # the Dockerfile's WORKDIR ("/" where it sets none)
    user: str | None  # the Dockerfile's USER
    notes: dict  # what was substituted and installed ahead


def shell_installs(script: str, search: list[Path]) -> Installs:
    """The installs in `script` (`search`: where `pip install -r FILE` looks for FILE)."""
    found = Installs()
    text = script.replace("\\\n", " ")
    for match in UV_INSTALLER.finditer(text):
        found.uv = f"uv=={match.group(1)}" if match.group(1) else "uv"
    for segment in SEPARATORS.split(REDIRECTION.sub(" ", text)):
        try:
            words = shlex.split(segment, comments=True)
        except ValueError:
            words = segment.split()
        while words and (words[0] in COMMAND_PREFIXES or re.match(r"^\w+=", words[0])):
            words = words[1:]
        if not words:
            continue
        command = PurePosixPath(words[0]).name
        if command in ("apt-get", "apt") and "install" in words[1:]:
            found.apt += _apt_packages(words[words.index("install") + 1 :])
        elif _pip_install(words):
            found.add(_pip_requirements(words[words.index("install") + 1 :], search))
        elif command in ("uvx", "uv"):
            found.pip += [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("--with", "-w")]
        elif _fetch(command, words):
            found.fetches.append(" ".join(words)[:200])
    found.apt, found.pip = list(dict.fromkeys(found.apt)), list(dict.fromkeys(found.pip))
    return found


def _fetch(command: str, words: list[str]) -> bool:
    """A download from outside the sandbox that no stand-in covers (uv's installer is covered; loopback is inside)."""
    if command in ("curl", "wget"):
        urls = [w for w in words if re.match(r"^(https?|ftp)://", w)]
        return any(not UV_INSTALLER.search(u) and not LOOPBACK.match(u) for u in urls)
    return (command == "git" and "clone" in words) or (command in ("npm", "yarn", "pnpm") and "install" in words[1:2])


def _pip_install(words: list[str]) -> bool:
    command = PurePosixPath(words[0]).name
    if "install" not in words:
        return False
    before = words[: words.index("install")]
    return (
        re.fullmatch(r"pip3?(\.\d+)?", command) is not None
        or (re.fullmatch(r"python3?(\.\d+)?", command) is not None and before[1:] == ["-m", "pip"])
        or (command == "uv" and before[1:] == ["pip"])
    )


def _apt_packages(words: list[str]) -> list[str]:
    packages, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in APT_VALUE_OPTIONS:
            skip = True
        elif not word.startswith("-"):
            packages.append(re.split(r"[=/]", word, maxsplit=1)[0])
    return packages


def _pip_requirements(words: list[str], search: list[Path]) -> Installs:
    found, skip = Installs(), None
    for word in words:
        if skip in ("-r", "--requirement"):
            found.add(_requirements_file(word, search))
            skip = None
        elif skip:
            skip = None
        elif word in PIP_VALUE_OPTIONS or word in ("-r", "--requirement", "-e", "--editable"):
            skip = word
            found.local = found.local or word in ("-e", "--editable")
        elif word.startswith("-"):
            continue
        elif word.startswith((".", "/", "~")) or word.endswith((".whl", ".tar.gz", ".zip")):
            found.local = True
        else:
            found.pip.append(word)
    return found


def _requirements_file(name: str, search: list[Path]) -> Installs:
    for folder in search:
        path = folder / PurePosixPath(name).name
        if path.is_file():
            lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
            return _pip_requirements([w for line in lines if line for w in shlex.split(line)], search)
    raise HarborTaskError(f"pip install -r {name}: no {PurePosixPath(name).name} in {', '.join(map(str, search))}")


@dataclass
class _Stage:
    name: str | None
    workdir: str = "/"
    user: str | None = None


def build_task_image(task: HarborTaskDir, on_step: Callable[[str], None] = log.info) -> TaskImage:
    """The task's image (built once per content hash) with its workdir, user and build notes."""
    if task.docker_image is not None:
        return _prebuilt(task.docker_image, "[environment]", task)
    return _build(task, task.environment_dir, task.path.name, on_step)


def build_verifier_image(
    task: HarborTaskDir,
    context: Path | None,
    docker_image: str | None,
    name: str,
    on_step: Callable[[str], None] = log.info,
) -> TaskImage | None:
    """A separate verifier's own image: `context/Dockerfile` (a tests/ folder) where given, else `docker_image`;
    None where it is a fresh copy of the agent's."""
    if context is not None:
        return _build(task, context, name, on_step)
    if docker_image is not None:
        return _prebuilt(docker_image, "[verifier.environment]", task)
    return None


def _prebuilt(image: str, table: str, task: HarborTaskDir) -> TaskImage:
    if not image_exists(image):
        raise HarborTaskError(
            f"{task.path}: {table}.docker_image {image!r} is not in the Docker engine and "
            "cannot be pulled here: load it (docker load), or give the task a Dockerfile"
        )
    return TaskImage(image, "/", None, {"prebuilt_image": image})


def _build(task: HarborTaskDir, context: Path, name: str, on_step: Callable[[str], None]) -> TaskImage:
    """`context/Dockerfile` built offline (see the module's docstring), tagged `harness-harbor/<name>:<hash>`."""
    dockerfile = (context / "Dockerfile").read_text(encoding="utf-8")
    instructions = dockerfile_instructions(dockerfile)
    if not instructions or instructions[0][0] not in ("FROM", "ARG"):
        raise HarborTaskError(f"{context / 'Dockerfile'}: does not start with FROM")
    build = Installs()
    for keyword, arguments in instructions:
        if keyword == "RUN":
            # its newlines are continuation lines (`\` at their ends): one command to the shell
            build.add(shell_installs(arguments.replace("\n", " "), [context]))
    uv = _uv_copies(instructions)
    if uv and not build.uv:
        build.uv = uv
    tests = Installs()
    for script, folders in task.verifier_scripts():
        installs = shell_installs(script.read_text(encoding="utf-8"), folders)
        if installs.fetches:
            raise HarborTaskError(
                f"{script} downloads at test time, and the sandbox has no network: {installs.fetches[0]}"
            )
        tests.add(installs)
    apt = build.apt + [p for p in tests.apt if p not in build.apt]
    check_apt_packages(apt)
    standins = _standins(instructions)
    recipes = {s.base: standin_recipe(s, apt) for s in standins.values()}
    wanted = Installs()
    wanted.add(build)
    wanted.add(tests)
    requirements = wanted.pip + ([wanted.uv] if wanted.uv else []) + (["setuptools", "wheel"] if wanted.local else [])
    python = next(iter(standins.values())).python if standins else None
    tags = {p: _tag(r) for p, r in recipes.items()}
    stages, text = _rewrite(instructions, standins, tags, bool(requirements))
    final = stages[-1]
    text += _final_steps(tests.pip + ([tests.uv] if tests.uv else []), tests.uv is not None, final.user)
    digest = _digest(context, text, requirements, python)
    image = f"{IMAGE_REPOSITORY}/{_repository_name(name)}:{digest}"
    notes = {
        "base_substituted": [s.describe() for s in standins.values()],
        "apt_installed_ahead": apt,
        "pip_wheelhouse": requirements,
        "verifier_installed_ahead": {"apt": tests.apt, "pip": tests.pip, **({"uv": tests.uv} if tests.uv else {})},
    }
    if not image_exists(image):
        for (python_version, toolchain), recipe in recipes.items():
            extra = f" and {', '.join(toolchain)}" if toolchain else ""
            on_step(
                f"{task.name}: the stand-in base for Python {python_version}{extra} with {len(apt)} Debian package(s)"
            )
            try:
                build_base_image(recipe, on_step)
            except SandboxError as err:
                raise HarborTaskError(f"{task.name}: the stand-in base could not be made: {err}") from None
        files = {p.name: p for p in sorted(context.iterdir()) if p.name != "Dockerfile"}
        if requirements:
            files[CONTEXT_WHEELHOUSE] = _wheelhouse(
                requirements, python or f"{sys.version_info[0]}.{sys.version_info[1]}"
            )
        on_step(f"{task.name}: building {image}")
        try:
            build_image(image, text, files, {"harness.task": task.name, "harness.harbor": "1"}, task.build_timeout)
        except SandboxError as err:
            raise HarborTaskError(f"{task.name}: {err}") from None
    try:  # the disk the task's image adds to its stand-in base
        notes["image_disk_mb"] = round(image_size(image) / 2**20, 1)
    except SandboxError:  # no Docker engine answers (the image is in another backend's store)
        pass
    return TaskImage(image, final.workdir, final.user, notes)


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) of each instruction: continuation lines joined, comments and blank lines left out, a
    `RUN` with a here-document made one the classic builder runs (`_heredoc`)."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    lines = iter(text.splitlines())
    for line in lines:
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if pending and line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + "\n"
            continue
        whole = (pending + line).strip()
        pending = ""
        keyword, _, arguments = whole.partition(" ")
        if keyword.upper() == "RUN" and (marker := HEREDOC.search(arguments)):
            arguments = _heredoc(arguments, marker, lines)
        instructions.append((keyword.upper(), arguments.strip()))
    if pending.strip():
        keyword, _, arguments = pending.strip().partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
    return instructions


def _heredoc(arguments: str, marker: re.Match, lines) -> str:
    """`RUN cmd <<'END'` and the lines up to `END` (BuildKit's here-document, which the classic builder cannot
    read) as one command: the body written to a file, then given to `cmd` on its standard input (run as the
    script where no command comes before it). Only a quoted delimiter: the body is then taken as written."""
    body = []
    for line in lines:
        if (line.lstrip("\t") if marker.group("strip") else line) == marker.group("word"):
            break
        body.append(line.lstrip("\t") if marker.group("strip") else line)
    else:
        raise HarborTaskError(f"RUN {arguments}: the here-document has no closing {marker.group('word')}")
    if not marker.group("quote"):
        raise HarborTaskError(
            f"RUN {arguments}: a here-document whose delimiter is not quoted (its body expanded by the shell) is "
            "not supported; quote it (<<'END') to take the body as written"
        )
    encoded = base64.b64encode(("\n".join(body) + "\n").encode()).decode()
    command = (arguments[: marker.start()] + f"< {HEREDOC_FILE}" + arguments[marker.end() :]).strip()
    if command.startswith("<"):  # `RUN <<'END'`: the body is the script
        command = f"sh {HEREDOC_FILE}"
    return f"echo {encoded} | base64 -d > {HEREDOC_FILE} && {{ {command}; }} && rm -f {HEREDOC_FILE}"


def _from_parts(arguments: str) -> tuple[str, str | None]:
    words = [w for w in arguments.split() if not w.startswith("--")]
    if not words:
        raise HarborTaskError("FROM names no image")
    alias = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
    return words[0], alias


def _standins(instructions: list[tuple[str, str]]) -> dict[str, StandIn]:
    """The stand-in of each FROM image the engine does not hold (earlier stages' names left alone)."""
    found: dict[str, StandIn] = {}
    stages: set[str] = set()
    for keyword, arguments in instructions:
        if keyword != "FROM":
            continue
        image, alias = _from_parts(arguments)
        if "$" in image:
            raise HarborTaskError(f"FROM {image}: an image named through a build argument is not supported")
        if image not in stages and image not in found and not image_exists(image):
            try:
                found[image] = standin_for(image)
            except SandboxError as err:
                raise HarborTaskError(str(err)) from None
        if alias:
            stages.add(alias)
    return found


UV_IMAGE = re.compile(r"(?:.+/)?astral-sh/uv:(\d+\.\d+\.\d+)(?:[-@].*)?$")


def _copy_from(arguments: str) -> str | None:
    """The image or stage of `COPY --from=X ...`, if any."""
    found = re.match(r"--from=(\S+)", arguments.strip())
    return found.group(1) if found else None


def _uv_copies(instructions: list[tuple[str, str]]) -> str | None:
    """uv's requirement where the Dockerfile copies uv out of its image (`COPY --from=ghcr.io/astral-sh/uv:X`)."""
    for keyword, arguments in instructions:
        image = _copy_from(arguments) if keyword == "COPY" else None
        match = UV_IMAGE.match(image) if image else None
        if match:
            return f"uv=={match.group(1)}"
    return None


def _uv_stand_in(arguments: str, version: str) -> str:
    """`COPY --from=<uv's image> /uv [/uvx] DEST` as the uv package (from the wheelhouse), its binaries copied to DEST."""
    *sources, dest = arguments.split()[1:]
    names = [PurePosixPath(source).name for source in sources]
    if not names or any(n not in ("uv", "uvx") for n in names):
        raise HarborTaskError(f"COPY {arguments}: only /uv and /uvx are stood in for from uv's image")
    into_folder = dest.endswith("/") or len(names) > 1
    steps = [
        f"python3 -m pip install uv=={version}",
        f"mkdir -p {shlex.quote(dest if into_folder else str(PurePosixPath(dest).parent))}",
    ]
    for name in names:
        target = shlex.quote(f"{dest.rstrip('/')}/{name}" if into_folder else dest)
        steps.append(f'{{ [ "$(command -v {name})" -ef {target} ] || cp "$(command -v {name})" {target}; }}')
    return "RUN " + " && ".join(steps)


def _rewrite(
    instructions: list[tuple[str, str]], standins: dict[str, StandIn], tags: dict[str, str], wheelhouse: bool
) -> tuple[list[_Stage], str]:
    """The Dockerfile with stand-ins in its FROM lines and the wheelhouse in each stage; the stages' workdir and user."""
    lines: list[str] = []
    stages: list[_Stage] = []
    for keyword, arguments in instructions:
        if keyword == "FROM":
            image, alias = _from_parts(arguments)
            inherited = next((s for s in stages if s.name == image), None)
            stages.append(_Stage(alias, inherited.workdir, inherited.user) if inherited else _Stage(alias))
            if image in standins:
                lines.append(f"FROM {tags[standins[image].base]}" + (f" AS {alias}" if alias else ""))
                lines.append("WORKDIR /")  # as in the public image: the base's own workdir is not the task's
            else:
                lines.append(f"FROM {arguments}")
            if wheelhouse:
                lines.append(f"COPY {CONTEXT_WHEELHOUSE} {WHEELHOUSE}")
            lines.append(f"ENV {OFFLINE_PIP}")
            continue
        if keyword == "WORKDIR" and stages:
            stages[-1].workdir = str(PurePosixPath(stages[-1].workdir) / arguments.strip("\"'"))
        if keyword == "USER" and stages:
            stages[-1].user = arguments.split()[0] if arguments else None
        source = _copy_from(arguments) if keyword == "COPY" else None
        if source and not source.isdigit() and source not in {s.name for s in stages} and not image_exists(source):
            uv = UV_IMAGE.match(source)
            if not uv:
                raise HarborTaskError(f"COPY --from={source}: the image cannot be pulled here and has no stand-in")
            lines.append(_uv_stand_in(arguments, uv.group(1)))
            continue
        lines.append(f"{keyword} " + arguments.replace("\n", " \\\n"))  # continuation lines as written
    if not stages:
        raise HarborTaskError("the Dockerfile has no FROM")
    return stages, "\n".join(lines) + "\n"


def _final_steps(requirements: list[str], uv_installer: bool, user: str | None) -> str:
    """The folders Harbor mounts or copies in, writable by any user, and what `tests/test.sh` would fetch,
    installed at the image's end (as root, then back to the image's user)."""
    folders = f"{LOGS}/agent {VERIFIER_DIR} {TESTS_DIR} {SOLUTION_DIR}"
    steps = ["USER root", f"RUN mkdir -p {folders} && chmod 777 {LOGS} {folders}"]
    if requirements:
        # over Debian's own copies (no RECORD file: pip cannot uninstall them)
        steps.append("RUN python3 -m pip install --ignore-installed " + " ".join(shlex.quote(r) for r in requirements))
    if user and user not in ("root", "0"):
        steps.append(f"USER {user}")
    if uv_installer:  # what uv's installer leaves: uv in ~/.local/bin and the env script that puts it on the PATH
        steps.append(
            'RUN mkdir -p "$HOME/.local/bin" && ln -sf "$(command -v uv)" "$(command -v uvx)" "$HOME/.local/bin/" && '
            f'echo {shlex.quote(UV_ENV_SCRIPT)} > "$HOME/.local/bin/env"'
        )
    return "\n".join(steps) + "\n"


def _wheelhouse(requirements: list[str], python: str) -> Path:
    """Wheels of `requirements` and their dependencies for `python`, downloaded on the host once."""
    key = hashlib.sha256(("\n".join([python, *sorted(requirements)])).encode()).hexdigest()[:12]
    folder = cache_dir() / "harbor" / "wheelhouses" / key
    if (folder / ".complete").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--python-version", python,
         "--dest", str(folder), *requirements],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise HarborTaskError(
            f"downloading the wheels of {', '.join(requirements)} for Python {python} failed: "
            f"{(done.stderr or done.stdout).strip()[-1500:]}"
        )
    (folder / ".complete").write_text("\n".join(sorted(requirements)) + "\n")
    return folder


def _tag(recipe: dict) -> str:
    return f"{BASE_REPOSITORY}:{recipe_hash(recipe)}"


def _digest(environment: Path, dockerfile: str, requirements: list[str], python: str | None) -> str:
    digest = hashlib.sha256(f"{RECIPE}\n{dockerfile}\n{sorted(requirements)}\n{python}".encode())
    for path in sorted(p for p in environment.rglob("*") if p.is_file() and p.name != "Dockerfile"):
        digest.update(str(path.relative_to(environment)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def _repository_name(name: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._") or "task"

"""A Harbor task directory read and checked: `task.toml`, `instruction.md`, `environment/`, `tests/`, `solution/`.

The fields are Harbor's (`harbor.models.task.config.TaskConfig`); those that change how a task runs here are
read, the rest kept as they are in `metadata`. Unknown keys are ignored, as Harbor's models ignore them.
What cannot run here is refused with the reason: a docker-compose environment, several steps,
a Windows task, GPUs or TPUs.

The verifier runs in the agent's sandbox (`[verifier].environment_mode = "shared"`), or in a fresh one of its
own (`"separate"`, Harbor's default where `[verifier.environment]` is given, and what `harbor tasks init`
writes): `tests/Dockerfile` built with `tests/` as its context where there is one, else
`[verifier.environment].docker_image`, else a fresh copy of the agent's image; the paths `artifacts` names are
copied over from the agent's sandbox to the same paths, as Harbor does.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import TaskError

DEFAULT_VERIFIER_TIMEOUT = 600.0  # Harbor's defaults
DEFAULT_BUILD_TIMEOUT = 600.0


class HarborTaskError(TaskError):
    """A Harbor task directory that cannot be run: the message names the file and what is wrong."""


@dataclass(frozen=True)
class HarborTaskDir:
    """One Harbor task directory, checked."""

    path: Path
    name: str  # [task].name where given, else the directory's name
    instruction: str
    config: dict[str, Any]  # task.toml as parsed
    agent_timeout: float | None
    agent_user: str | None
    verifier_timeout: float
    verifier_user: str | None
    verifier_env: dict[str, str]
    solution_env: dict[str, str]
    build_timeout: float
    cpus: float
    memory_mb: int | None
    storage_mb: int | None
    workdir: str | None  # [environment].workdir
    env: dict[str, str]  # [environment].env
    docker_image: str | None  # [environment].docker_image: a prebuilt image instead of environment/
    network_asked: bool  # whether the task asked for a network (never given here)
    verifier_separate: bool = False  # the verifier runs in a sandbox of its own
    verifier_image: str | None = None  # [verifier.environment].docker_image
    artifacts: tuple[str, ...] = ()  # paths copied from the agent's sandbox to the separate verifier's
    notes: list[str] = field(default_factory=list)

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    @property
    def test_script(self) -> Path:
        return self.tests_dir / "test.sh"

    @property
    def solution_dir(self) -> Path:
        return self.path / "solution"

    @property
    def solve_script(self) -> Path:
        return self.solution_dir / "solve.sh"


def is_task_dir(path: Path) -> bool:
    return (path / "task.toml").is_file() or (path / "instruction.md").is_file()


def read_task_dir(path: str | Path) -> HarborTaskDir:
    """The task at `path`, checked; a HarborTaskError says what is missing or malformed."""
    path = Path(path).resolve()
    config_path = path / "task.toml"
    if not config_path.is_file():
        raise HarborTaskError(f"{path}: no task.toml")
    try:
        config = tomllib.loads(config_path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise HarborTaskError(f"{config_path}: not valid TOML: {err}") from None
    if config.get("steps"):
        names = ", ".join(str(step.get("name")) for step in config["steps"] if isinstance(step, dict))
        raise HarborTaskError(
            f"{config_path}: a multi-step task ([[steps]]: {names}) is not supported: here a task is one "
            "instruction.md, one agent run and one tests/test.sh, not steps/NAME/ run in turn"
        )
    instruction_path = path / "instruction.md"
    if not instruction_path.is_file():
        raise HarborTaskError(f"{path}: no instruction.md (the prompt)")
    instruction = instruction_path.read_text(encoding="utf-8")
    if not instruction.strip():
        raise HarborTaskError(f"{instruction_path}: empty")
    if not (path / "tests" / "test.sh").is_file():
        raise HarborTaskError(f"{path}: no tests/test.sh (the verifier)")
    task = _table(config, "task", config_path)
    environment = _table(config, "environment", config_path)
    agent = _table(config, "agent", config_path)
    verifier = _table(config, "verifier", config_path)
    solution = _table(config, "solution", config_path)
    env_dir = path / "environment"
    docker_image = _optional(environment, "docker_image", str, config_path)
    for compose in (env_dir / "docker-compose.yaml", env_dir / "docker-compose.yml"):
        if compose.is_file():
            _check_compose(compose)
    if docker_image is None and not (env_dir / "Dockerfile").is_file():
        raise HarborTaskError(f"{path}: no environment/Dockerfile and no [environment].docker_image")
    if str(environment.get("os", "linux")).lower() != "linux":
        raise HarborTaskError(f"{config_path}: only Linux tasks run here, not os = {environment['os']!r}")
    if environment.get("gpus") or environment.get("tpu"):
        raise HarborTaskError(f"{config_path}: tasks that need GPUs or TPUs are not supported")
    separate = _verifier_separate(verifier, config_path)
    network = environment.get("network_mode", "public" if environment.get("allow_internet", True) else "no-network")
    return HarborTaskDir(
        path=path,
        name=_optional(task, "name", str, config_path) or path.name,
        instruction=instruction,
        config=config,
        agent_timeout=_optional(agent, "timeout_sec", (int, float), config_path),
        agent_user=_user(agent, config_path),
        verifier_timeout=float(
            _optional(verifier, "timeout_sec", (int, float), config_path) or DEFAULT_VERIFIER_TIMEOUT
        ),
        verifier_user=_user(verifier, config_path),
        verifier_env=_strings(verifier, "env", config_path),
        solution_env=_strings(solution, "env", config_path),
        build_timeout=float(
            _optional(environment, "build_timeout_sec", (int, float), config_path) or DEFAULT_BUILD_TIMEOUT
        ),
        cpus=float(_optional(environment, "cpus", (int, float), config_path) or 1),
        memory_mb=_size_mb(environment, "memory", config_path),
        storage_mb=_size_mb(environment, "storage", config_path),
        workdir=_optional(environment, "workdir", str, config_path),
        env=_strings(environment, "env", config_path),
        docker_image=docker_image,
        network_asked=network != "no-network",
        verifier_separate=separate,
        verifier_image=_optional(_table(verifier, "environment", config_path), "docker_image", str, config_path),
        artifacts=_artifacts(config, config_path),
    )


def _check_compose(compose: Path) -> None:
    """Accept a compose file that only puts Harbor's `main` service on no network, as every sandbox here is (what
    `harness tasks export` writes); refuse any other, naming its services: a sandbox here is one container."""
    try:
        data = yaml.safe_load(compose.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise HarborTaskError(f"{compose}: not valid YAML: {err}") from None
    services = data.get("services") if isinstance(data, dict) else None
    if services == {"main": {"network_mode": "none"}}:
        return
    names = ", ".join(map(str, services)) if isinstance(services, dict) and services else "none"
    raise HarborTaskError(
        f"{compose}: a docker-compose environment (services: {names}) is not supported: a sandbox here is one "
        "container built from environment/Dockerfile, and the compose file may only put `main` on "
        "network_mode: none"
    )


def _verifier_separate(verifier: dict, where: Path) -> bool:
    """Harbor's rule: an explicit `environment_mode`, else separate where `[verifier.environment]` is given."""
    mode = verifier.get("environment_mode")
    if mode is None:
        return "environment" in verifier
    if mode not in ("shared", "separate"):
        raise HarborTaskError(f"{where}: [verifier].environment_mode = {mode!r}: expected 'shared' or 'separate'")
    if mode == "shared" and "environment" in verifier:
        raise HarborTaskError(f"{where}: [verifier].environment_mode = 'shared' with a [verifier.environment]")
    return mode == "separate"


def _artifacts(config: dict, where: Path) -> tuple[str, ...]:
    """The sources of `artifacts` (a path, or a table with `source`), absolute paths of the agent's sandbox."""
    sources = []
    for entry in config.get("artifacts", []):
        source = entry.get("source") if isinstance(entry, dict) else entry
        if not isinstance(source, str) or not source.startswith("/"):
            raise HarborTaskError(f"{where}: artifacts: {entry!r} names no absolute source path")
        if isinstance(entry, dict) and (entry.get("exclude") or entry.get("service") not in (None, "main")):
            raise HarborTaskError(f"{where}: artifacts: {entry!r}: exclude and other services are not supported")
        sources.append(source.rstrip("/") or "/")
    return tuple(sources)


def _table(config: dict, name: str, where: Path) -> dict[str, Any]:
    value = config.get(name, {})
    if not isinstance(value, dict):
        raise HarborTaskError(f"{where}: [{name}] must be a table")
    return value


def _optional(table: dict, key: str, kind, where: Path):
    value = table.get(key)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise HarborTaskError(f"{where}: {key} = {value!r} has the wrong type")
    if isinstance(value, (int, float)) and value <= 0:
        raise HarborTaskError(f"{where}: {key} must be positive, not {value!r}")
    return value


def _user(table: dict, where: Path) -> str | None:
    value = table.get("user")
    if value is None:
        return None
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise HarborTaskError(f"{where}: user = {value!r} must be a name or a uid")
    return str(value)


def _strings(table: dict, key: str, where: Path) -> dict[str, str]:
    value = table.get(key, {})
    if not isinstance(value, dict) or not all(isinstance(v, (str, int, float)) for v in value.values()):
        raise HarborTaskError(f"{where}: {key} must be a table of strings")
    return {str(k): str(v) for k, v in value.items()}


def _size_mb(environment: dict, name: str, where: Path) -> int | None:
    """`<name>_mb`, or the older `<name> = "2G"` form."""
    if environment.get(f"{name}_mb") is not None:
        return int(_optional(environment, f"{name}_mb", (int, float), where))
    text = environment.get(name)
    if text is None:
        return None
    units = {"G": 1024, "M": 1, "K": 1 / 1024}
    size = str(text).strip().upper()
    try:
        return int(float(size[:-1]) * units[size[-1]])
    except (KeyError, ValueError, IndexError):
        raise HarborTaskError(f"{where}: {name} = {text!r}: expected a size such as '2G' or '512M'") from None

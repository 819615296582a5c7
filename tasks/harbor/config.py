"""A Harbor task directory read and checked: `task.toml`, `instruction.md`, `environment/`, `tests/`, `solution/`.

The fields are Harbor's (`harbor.models.task.config.TaskConfig`); those that change how a task runs here are
read, the rest kept as they are in `metadata`. Unknown keys are ignored, as Harbor's models ignore them.
What cannot run here is refused with the reason: a docker-compose environment, a Windows task, GPUs or TPUs.

A multi-step task (`[[steps]]`) is read into its `steps`, each from `steps/NAME/` as Harbor reads it: its
`instruction.md`, its `tests/` over the task's own `tests/` (its `test.sh`, else the task's), its `solution/`
(else the task's), its `workdir/` (uploaded to the working directory before the step, `setup.sh` run there),
its `[steps.agent]` and `[steps.verifier]` over the task's, and its `min_reward`. The trial's reward is
`multi_step_reward_strategy`: `mean` (the default: per key over the steps, a missing key 0) or `final`.

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
    steps: tuple[HarborStep, ...] = ()  # a multi-step task's steps, in order (empty: one instruction, one verifier)
    reward_strategy: str = "mean"  # multi_step_reward_strategy
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

    def verifier_scripts(self) -> list[tuple[Path, list[Path]]]:
        """Each test script the task's verifiers run, with the folders /tests is made of."""
        if not self.steps:
            return [(self.test_script, [self.tests_dir])]
        return [(step.test_script, list(step.tests)) for step in self.steps]


@dataclass(frozen=True)
class HarborStep:
    """One step of a multi-step task: `steps/NAME/` with the task's settings under the step's own."""

    name: str
    instruction: str
    tests: tuple[Path, ...]  # copied to /tests in turn: the task's tests/ (where there is one), then the step's
    test_script: Path  # the step's tests/test.sh, else the task's
    solution_dir: Path  # the step's solution/, else the task's
    workdir_dir: Path  # steps/NAME/workdir: uploaded to the working directory before the step (may not exist)
    agent_timeout: float | None
    verifier_timeout: float
    verifier_user: str | None
    verifier_env: dict[str, str]  # the task's [verifier].env, then the step's
    min_reward: dict[str, float] | None  # each key's threshold; a bare number gates `reward`
    verifier_separate: bool = False  # the step's verifier runs in a fresh sandbox of its own
    verifier_context: Path | None = None  # where separate: the folder whose Dockerfile is its image
    verifier_image: str | None = None  # where separate: a prebuilt image for it
    artifacts: tuple[str, ...] = ()  # where separate: the task's artifacts and the step's

    @property
    def setup_script(self) -> Path:
        return self.workdir_dir / "setup.sh"


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
    task = _table(config, "task", config_path)
    environment = _table(config, "environment", config_path)
    agent = _table(config, "agent", config_path)
    verifier = _table(config, "verifier", config_path)
    solution = _table(config, "solution", config_path)
    steps = _steps(path, config, agent, verifier, config_path)
    if steps:
        instruction = steps[0].instruction
    else:
        instruction = _instruction(path / "instruction.md")
        if not (path / "tests" / "test.sh").is_file():
            raise HarborTaskError(f"{path}: no tests/test.sh (the verifier)")
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
        steps=steps,
        reward_strategy=_reward_strategy(config, config_path),
    )


def _instruction(path: Path) -> str:
    if not path.is_file():
        raise HarborTaskError(f"{path.parent}: no {path.name} (the prompt)")
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        raise HarborTaskError(f"{path}: empty")
    return text


def _steps(path: Path, config: dict, agent: dict, verifier: dict, where: Path) -> tuple[HarborStep, ...]:
    """The `[[steps]]` of a multi-step task, each checked (see the module's docstring)."""
    entries = config.get("steps") or []
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise HarborTaskError(f"{where}: steps must be an array of tables ([[steps]])")
    steps, seen = [], set()
    for entry in entries:
        name = entry.get("name")
        if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name:
            raise HarborTaskError(f"{where}: [[steps]] name = {name!r}: expected a plain directory name")
        if name.casefold() in seen:
            raise HarborTaskError(f"{where}: two steps are named {name!r}")
        seen.add(name.casefold())
        step_dir = path / "steps" / name
        step_agent = _table(entry, "agent", where)
        step_verifier = _table(entry, "verifier", where)
        own_level = "environment_mode" in step_verifier or "environment" in step_verifier
        separate = _verifier_separate(step_verifier if own_level else verifier, where)
        if step_agent.get("user") is not None and _user(step_agent, where) != _user(agent, where):
            raise HarborTaskError(f"{where}: step {name!r}: an agent user other than the task's is not supported")
        own_tests = step_dir / "tests"
        tests = tuple(d for d in (path / "tests", own_tests) if d.is_dir())
        script = next((d / "test.sh" for d in (own_tests, path / "tests") if (d / "test.sh").is_file()), None)
        if script is None:
            raise HarborTaskError(f"{step_dir}: no tests/test.sh, and the task has none (the step's verifier)")
        own_solution = step_dir / "solution"
        steps.append(
            HarborStep(
                name=name,
                instruction=_instruction(step_dir / "instruction.md"),
                tests=tests,
                test_script=script,
                solution_dir=own_solution if own_solution.is_dir() else path / "solution",
                workdir_dir=step_dir / "workdir",
                agent_timeout=_optional(step_agent, "timeout_sec", (int, float), where)
                or _optional(agent, "timeout_sec", (int, float), where),
                verifier_timeout=float(
                    _optional(step_verifier, "timeout_sec", (int, float), where)
                    or _optional(verifier, "timeout_sec", (int, float), where)
                    or DEFAULT_VERIFIER_TIMEOUT
                ),
                verifier_user=_user(step_verifier, where) or _user(verifier, where),
                verifier_env={**_strings(verifier, "env", where), **_strings(step_verifier, "env", where)},
                min_reward=_min_reward(entry.get("min_reward"), f"{where}: step {name!r}"),
                **(_step_verifier(step_verifier, verifier, own_tests, path / "tests", where) if separate else {}),
                artifacts=_artifacts(config, where) + _artifacts(entry, where) if separate else (),
            )
        )
    return tuple(steps)


def _step_verifier(step_verifier: dict, verifier: dict, own_tests: Path, task_tests: Path, where: Path) -> dict:
    """A step's separate verifier image, in Harbor's order: the step's `[steps.verifier.environment].docker_image`,
    its tests/Dockerfile, the task's `[verifier.environment].docker_image`, the task's tests/Dockerfile; else
    (nothing set) a fresh copy of the agent's image."""
    for table, folder in ((step_verifier, own_tests), (verifier, task_tests)):
        image = _optional(_table(table, "environment", where), "docker_image", str, where)
        if image:
            return {"verifier_separate": True, "verifier_image": image}
        if (folder / "Dockerfile").is_file():
            return {"verifier_separate": True, "verifier_context": folder}
    return {"verifier_separate": True}


def _min_reward(value, where: str) -> dict[str, float] | None:
    """Harbor's gate: a number gates the `reward` key, a table each of its keys."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {"reward": float(value)}
    if isinstance(value, dict) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value.values()):
        return {str(k): float(v) for k, v in value.items()}
    raise HarborTaskError(f"{where}: min_reward = {value!r}: expected a number or a table of numbers")


def _reward_strategy(config: dict, where: Path) -> str:
    strategy = config.get("multi_step_reward_strategy") or "mean"
    if strategy not in ("mean", "final"):
        raise HarborTaskError(f"{where}: multi_step_reward_strategy = {strategy!r}: expected 'mean' or 'final'")
    return strategy


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

"""Task kinds: everything the harness knows about one `env_class`, registered in one place.

A kind is its Environment class (the episode's task side), what its outcome is (`answer`: the
final answer, `patch`: the diff of the repository, which also becomes the SWE-bench
prediction), its scripted reference turns (`gold`, optional) and the reward function used
when a task's `reward_spec` names none. Adding a kind is one file that calls `register_kind`;
a task may also name its kind as `env_class: my_module:MyEnvironment` (an Environment subclass,
a TaskKind, or a skyrl-gym `BaseTextEnv` class, run through `harness.skyrl_adapter`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from sandboxes import Backend, Sandbox, SandboxSpec
from infra.plugins import Registry, RegistryError
from tasks.task import Task

from ..environments import Environment
from ..errors import HarnessError
from ..policy import Completion
from ..skyrl_adapter import skyrl_environment

OUTCOMES = ("answer", "patch")
GoldTurns = Callable[[Task, bool], list[Completion]]  # (task, use_tools) -> the reference turns


@dataclass(frozen=True)
class TaskKind:
    name: str
    environment: type[Environment]
    outcome: str = "answer"
    gold: GoldTurns | None = None
    reward: str | None = None
    # The sandboxes its verifier starts beside the episode's (e.g. a fresh copy to run the user's tests in).
    verifier_sandboxes: Callable[[Task], list[SandboxSpec]] | None = None
    # What a run's report says about a task of this kind (e.g. how its image was made): one line each.
    report_notes: Callable[[Task], list[str]] | None = None

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise HarnessError(f"task kind {self.name!r}: outcome must be one of {OUTCOMES}, not {self.outcome!r}")


def _as_kind(name: str, obj: Any) -> TaskKind:
    if isinstance(obj, TaskKind):
        return obj
    if isinstance(obj, type) and issubclass(obj, Environment):
        return TaskKind(name, obj)
    if isinstance(obj, type) and callable(getattr(obj, "step", None)) and callable(getattr(obj, "init", None)):
        return TaskKind(name, skyrl_environment(obj))
    raise RegistryError(
        f"task kind {name!r} names {obj!r}: expected a TaskKind, an Environment subclass or a BaseTextEnv class"
    )


KINDS: Registry[TaskKind] = Registry("task kind (env_class)", "harness.task_kinds", convert=_as_kind)


def register_kind(
    name: str,
    environment: type[Environment],
    *,
    outcome: str = "answer",
    gold: GoldTurns | None = None,
    reward: str | None = None,
    verifier_sandboxes: Callable[[Task], list[SandboxSpec]] | None = None,
    report_notes: Callable[[Task], list[str]] | None = None,
    replace: bool = False,
) -> TaskKind:
    """Make tasks with `env_class: name` run in `environment`; see TaskKind for the rest."""
    kind = TaskKind(name, environment, outcome, gold, reward, verifier_sandboxes, report_notes)
    KINDS.register(name, kind, replace=replace)
    return kind


def register_skyrl_env(name: str, text_env_class: type, replace: bool = False) -> TaskKind:
    """Make tasks with `env_class: name` run in `text_env_class`, a skyrl-gym BaseTextEnv subclass."""
    return KINDS.register(name, TaskKind(name, skyrl_environment(text_env_class)), replace=replace)


def kind_of(task: Task) -> TaskKind:
    return KINDS.get(task.env_class)


def make_environment(
    task: Task, backend: Backend | None = None, sandbox: Sandbox | None = None, command_timeout: float = 120.0
) -> Environment:
    kind = kind_of(task)
    env = kind.environment(task, backend, sandbox, command_timeout)
    env.default_reward = kind.reward
    return env


from . import gsm8k, harbor, repo, swe  # noqa: E402,F401  (the built-in kinds register themselves)

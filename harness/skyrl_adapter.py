"""skyrl-gym environments run here unchanged: a `BaseTextEnv` class (`init`, `step`, `close`) as a task kind.

Name the class as a task's `env_class` (`my_module:MyEnv`), or register it under a short name with
`register_skyrl_env(name, MyEnv)`. It is built as SkyRL builds it, `MyEnv(env_config, extras)` with
`extras` = the row's `reward_spec`, `extra_info`, `data_source` and `max_turns`, and `env_config` =
`extra_info["env_config"]` (else empty). Every assistant reply goes to `step` as text; the returned
observations are appended to the conversation, and the episode's reward is the sum of the step
rewards (each step's reward and metadata are kept in the reward details).
"""

from __future__ import annotations

from typing import Any

from tasks.task import Reward

from .environments import Environment, StepResult
from .errors import HarnessError
from .parsing import ParsedTurn


class SkyRLEnvironment(Environment):
    text_env_class: type = object  # set per kind by `skyrl_kind`

    def init(self) -> list[dict[str, Any]]:
        task = self.task
        extras = {
            "reward_spec": dict(task.reward_spec),
            "extra_info": dict(task.metadata),
            "data_source": task.data_source,
            "max_turns": task.max_turns,
        }
        try:
            self.text_env = self.text_env_class(task.metadata.get("env_config") or {}, extras)
            prompt, _ = self.text_env.init([dict(m) for m in task.prompt])
        except Exception as err:  # a user's environment: any failure is reported as a clear error
            raise HarnessError(
                f"the skyrl-gym environment {self.text_env_class.__name__} failed to start: {type(err).__name__}: {err}"
            ) from err
        self.env_steps: list[dict[str, Any]] = []  # each env.step()'s reward and metadata
        return [dict(m) for m in prompt]

    def step(self, turn: ParsedTurn) -> StepResult:
        output = self.text_env.step(turn.raw or turn.content)
        reward, metadata = float(output.get("reward") or 0.0), output.get("metadata") or {}
        self.env_steps.append({"reward": reward, "metadata": metadata})
        self.outcome = turn.raw or turn.content
        return StepResult(
            [dict(m) for m in output.get("observations") or []], done=bool(output.get("done")), info=metadata
        )

    def finish(self) -> Reward:
        steps = getattr(self, "env_steps", [])
        metrics = (
            self.text_env.get_metrics() if hasattr(self, "text_env") and hasattr(self.text_env, "get_metrics") else {}
        )
        return Reward(sum(s["reward"] for s in steps), {"env_steps": steps, "metrics": metrics})

    def close(self) -> None:
        if hasattr(self, "text_env"):
            self.text_env.close()
        super().close()


def skyrl_environment(text_env_class: type) -> type[SkyRLEnvironment]:
    """The Environment class that runs `text_env_class` (a skyrl-gym BaseTextEnv subclass)."""
    return type(f"SkyRL_{text_env_class.__name__}", (SkyRLEnvironment,), {"text_env_class": text_env_class})

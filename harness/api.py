"""The public API for your own environments, tools, rewards and policies: import from here.

    from harness.api import ToolEnvironment, register_kind, register_reward, tool_turn

A **task kind** (`register_kind`) is what a task's `env_class` names: an Environment class, what
its outcome is (`answer` or `patch`), optional scripted gold turns, and the default reward
function. **Reward functions** (`register_reward`) are selected by `reward_spec.method`; **tools**
(`register_tool`) are named in a task's `tools`; **policies** (`register_policy`) are `--checkpoint`
values; **tool-call formats** (`register_tool_call_format`) parse a model family's calls, chosen
by its chat template; **scaffolds** (`register_scaffold`) are `--scaffold` values; **context strategies**
(`register_context_strategy`) are `--context` values. Anything registered
may instead be named by a `module:Name` path, or installed under the
entry-point groups `harness.task_kinds`, `harness.rewards`, `harness.tools`, `harness.policies`,
`harness.advantage_estimators`, `harness.scaffolds`, `harness.context_strategies`. Load your module with `harness --plugin MODULE ...` or
`plugins: [MODULE]` in a training YAML. Advantage estimators: `trainer.algorithms.register_advantage`.
skyrl-gym `BaseTextEnv` classes run as they are: name them as `env_class`, or `register_skyrl_env`.
"""

from sandboxes import Backend, ExecResult, Sandbox, SandboxError, SandboxSpec
from infra.plugins import RegistryError, load_plugins
from tasks.task import Reward, Task
from tasks.grading.verifiers import register_reward, verify

from .context import ContextStrategy, register_context_strategy
from .environments import Environment, StepResult, ToolEnvironment
from .errors import ToolError
from .kinds import TaskKind, kind_of, register_kind, register_skyrl_env
from .parsing import ParsedTurn, ToolCallFormat, marker_start, register_tool_call_format
from .policies.factory import register_policy
from .policy import Completion, Policy, Sampling, tool_turn
from .scaffolds import Scaffold, register_scaffold, text_action
from .tools import Toolbox, register_tool

__all__ = [
    "Backend",
    "Completion",
    "ContextStrategy",
    "Environment",
    "ExecResult",
    "ParsedTurn",
    "Policy",
    "RegistryError",
    "Reward",
    "Sampling",
    "Sandbox",
    "SandboxError",
    "SandboxSpec",
    "Scaffold",
    "StepResult",
    "Task",
    "TaskKind",
    "ToolCallFormat",
    "ToolEnvironment",
    "ToolError",
    "Toolbox",
    "kind_of",
    "load_plugins",
    "marker_start",
    "register_context_strategy",
    "register_kind",
    "register_policy",
    "register_reward",
    "register_scaffold",
    "register_skyrl_env",
    "register_tool",
    "register_tool_call_format",
    "text_action",
    "tool_turn",
    "verify",
]

"""Scaffolds: what drives an episode's turns. `harness` is our own loop (`harness.episode`); any
other registered scaffold is a program that runs as it is, its model calls going to the
intercepting endpoint (`harness.scaffolds.intercept`) in front of the episode's policy and its
shell commands to the episode's sandbox (`programs/harness_shell.py`).

A scaffold is a `Scaffold`: its name, the command that starts it, and how a scripted turn (the
`gold` and `empty` policies' tool calls) is written in its action format. Register your own with
`register_scaffold`, or name one as `--scaffold module:Name` (a Scaffold object); see
docs/scaffolds.md.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from infra.plugins import Registry, RegistryError

from ..errors import HarnessError
from ..parsing import ToolCall
from ..policy import Completion

PROGRAMS = (
    Path(__file__).parent / "programs"
)  # on the scaffold's PYTHONPATH: harness_shell and the built-in scaffold programs
OWN_LOOP = "harness"


def shell_command(call: ToolCall) -> str | None:
    """A scripted tool call as one shell command (None for `submit`): how gold edits reach a scaffold
    whose only tool is the shell. File contents travel base64-encoded, so any text survives quoting."""
    arguments = json.loads(call.arguments or "{}")
    if call.name == "submit":
        return None
    if call.name == "bash":
        return arguments["command"]
    if call.name == "str_replace_editor" and arguments.get("command") == "create":
        path, data = arguments["path"], base64.b64encode(arguments["file_text"].encode()).decode()
        return f"mkdir -p \"$(dirname '{path}')\" && echo {data} | base64 -d > '{path}'"
    if call.name == "str_replace_editor" and arguments.get("command") == "str_replace":
        edit = base64.b64encode(json.dumps(arguments).encode()).decode()
        return (
            "python3 -c 'import base64,json,pathlib;e=json.loads(base64.b64decode(\"" + edit + '"));'
            'p=pathlib.Path(e["path"]);t=p.read_text();assert t.count(e["old_str"])==1,"old_str not unique";'
            'p.write_text(t.replace(e["old_str"],e.get("new_str","")))\''
        )
    raise HarnessError(f"a scripted `{call.name}` call has no shell equivalent")


def text_action(block: str, submit: str) -> Callable[[Completion], Completion]:
    """Scripted turns as text with one fenced code block of language `block`; `submit` is the command
    that submits in that scaffold."""

    def express(completion: Completion) -> Completion:
        commands = [shell_command(call) for call in completion.tool_calls or []]
        command = " && ".join(c if c is not None else submit for c in commands)
        return Completion(
            text=f"THOUGHT: the reference solution's next step.\n\n```{block}\n{command}\n```\n",
            finish_reason="stop",
            prompt_tokens=completion.prompt_tokens,
        )

    return express


def tool_action(names: dict[str, str], submit: ToolCall) -> Callable[[Completion], Completion]:
    """Scripted turns as native tool calls of a scaffold whose tools share our schemas under other names
    (`names`: ours -> its); `submit` is its call that submits."""

    def express(completion: Completion) -> Completion:
        calls = []
        for call in completion.tool_calls or []:
            if call.name == "submit":
                calls.append(ToolCall(call.id, submit.name, submit.arguments))
            elif call.name in names:
                calls.append(ToolCall(call.id, names[call.name], call.arguments))
            else:
                raise HarnessError(f"a scripted `{call.name}` call has no equivalent among the scaffold's tools")
        return Completion(
            text="The reference solution's next step.",
            tool_calls=calls,
            finish_reason="tool_calls",
            prompt_tokens=completion.prompt_tokens,
        )

    return express


@dataclass(frozen=True)
class Scaffold:
    """A program that drives an episode. `command` is its argv (or a function giving it, resolved per
    episode); `express` writes a scripted policy's tool-call turn in the scaffold's own action format;
    `output_limit` bytes of its stdout and stderr are kept, and one that writes more is stopped."""

    name: str
    command: Sequence[str] | Callable[[], Sequence[str]]
    express: Callable[[Completion], Completion] = text_action("bash", "submit")
    output_limit: int = 8 << 20

    def argv(self) -> list[str]:
        return list(self.command() if callable(self.command) else self.command)

    def drive(self, *args: Any, **kwargs: Any) -> None:
        from .run import drive

        drive(self, *args, **kwargs)


def _as_scaffold(name: str, obj: Any) -> Scaffold:
    if isinstance(obj, Scaffold):
        return obj
    raise RegistryError(f"scaffold {name!r} names {obj!r}: expected a harness.scaffolds.Scaffold")


SCAFFOLDS: Registry[Scaffold] = Registry("scaffold", "harness.scaffolds", convert=_as_scaffold)


def register_scaffold(scaffold: Scaffold, replace: bool = False) -> Scaffold:
    SCAFFOLDS.register(scaffold.name, scaffold, replace=replace)
    return scaffold


def get_scaffold(name: str) -> Scaffold | None:
    """The scaffold `--scaffold NAME` names; None for our own loop."""
    return None if name == OWN_LOOP else SCAFFOLDS.get(name)


def _mini_swe_agent_python() -> str:
    """$HARNESS_MINI_SWE_AGENT_PYTHON (a Python with `pip install mini-swe-agent`), else its own venv in the cache."""
    from .venvs import MINI_SWE_AGENT, venv_python

    return os.environ.get("HARNESS_MINI_SWE_AGENT_PYTHON") or str(venv_python(MINI_SWE_AGENT))


def _openhands_python() -> str:
    """$HARNESS_OPENHANDS_PYTHON (a Python 3.12 with openhands-sdk and openhands-tools), else its own venv in the cache."""
    from .venvs import OPENHANDS, venv_python

    return os.environ.get("HARNESS_OPENHANDS_PYTHON") or str(venv_python(OPENHANDS))


register_scaffold(
    Scaffold(
        "openhands",
        lambda: [_openhands_python(), str(PROGRAMS / "openhands_agent.py")],
        express=tool_action(
            {"bash": "terminal", "str_replace_editor": "file_editor"},
            ToolCall("finish", "finish", json.dumps({"message": "Done."})),
        ),
    )
)

register_scaffold(
    Scaffold(
        "mini-swe-agent",
        lambda: [_mini_swe_agent_python(), str(PROGRAMS / "mini_swe_agent.py")],
        express=text_action("mswea_bash_command", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"),
    )
)

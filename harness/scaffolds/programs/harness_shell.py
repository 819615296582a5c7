"""The shell of a harness episode, for a scaffold that runs as its own program (standard library only).

The harness starts the scaffold with this folder on PYTHONPATH and these variables set:

    OPENAI_BASE_URL, OPENAI_API_KEY   the intercepting model endpoint and this episode's key
    HARNESS_MODEL                     the model name to send
    HARNESS_SHELL_URL                 where `run` and `submit` go
    HARNESS_TASK_FILE                 the task: {"id", "sample", "statement", "prompt", "workdir",
                                      "max_turns", "command_timeout"}
    HARNESS_OUTPUT_DIR                a folder for the scaffold's own records (kept in the run directory)

    import harness_shell
    task = harness_shell.task()
    result = harness_shell.run("cd /testbed && git status")  # {"output", "exit_code", "timed_out"}
    harness_shell.submit()  # the work tree as it is now is the outcome
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


class ShellError(Exception):
    """The harness refused or could not run the request (the message says why)."""


def task() -> dict[str, Any]:
    return json.loads(Path(os.environ["HARNESS_TASK_FILE"]).read_text())


def run(command: str, timeout: float | None = None) -> dict[str, Any]:
    """Run `command` in the episode's persistent shell (cwd and variables survive between calls)."""
    wait = (timeout or task_limit()) + 30
    return _post("/exec", {"command": command, "timeout": timeout}, wait)


def submit() -> None:
    """End the episode: the sandbox's state now is what is graded."""
    _post("/submit", {}, 30)


def task_limit() -> float:
    return float(task().get("command_timeout", 120))


def _post(route: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    request = urllib.request.Request(
        os.environ["HARNESS_SHELL_URL"] + route,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as err:
        try:
            message = json.loads(err.read())["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = str(err)
        raise ShellError(f"{route[1:]}: {message}") from None
    except (urllib.error.URLError, OSError) as err:
        raise ShellError(f"{route[1:]}: the harness does not answer ({err})") from None

"""Running the real `harness` command in a subprocess, and reading its append-only results."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from infra.plugins import PLUGINS_ENV

ROOT = Path(__file__).resolve().parents[1]


def harness(*args: str, timeout: float = 1800, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    """`harness ARGS` from the repository root; `pythonpath` also makes a user's own modules importable. The command
    starts as a user's would: without the plugins that tests loaded into this process (`HARNESS_PLUGINS`)."""
    env = {
        **{key: value for key, value in os.environ.items() if key != PLUGINS_ENV},
        "PYTHONPATH": os.pathsep.join(filter(None, [str(pythonpath or ""), os.environ.get("PYTHONPATH", "")])),
    }
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env
    )


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def eval_rows(tasks: str, checkpoint: str, backend: str, output: Path, *extra: str) -> list[dict]:
    """`harness eval` of `checkpoint` on `tasks` on `backend` into `output`, which must succeed: its results' rows."""
    done = harness(
        "eval", "--checkpoint", checkpoint, "--tasks", tasks, "--backend", backend, "--output", str(output), *extra
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return rows_of(output / "results.jsonl")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(checkpoint: Path, *args: str, startup_s: float = 120):
    """`harness serve --checkpoint CHECKPOINT --model-name tiny ARGS` on a free port; yields its /v1 URL."""
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli",
            "serve",
            "--checkpoint",
            str(checkpoint),
            "--port",
            str(port),
            "--model-name",
            "tiny",
            *args,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + startup_s
        while True:
            try:
                urllib.request.urlopen(f"{url}/models", timeout=2)
                break
            except OSError:
                assert server.poll() is None, server.stdout.read()
                assert time.monotonic() < deadline, f"the server did not answer within {startup_s} s"
                time.sleep(0.3)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=60)


def check_openai_endpoint(served: str) -> None:
    """The real OpenAI client against a `harness serve` endpoint: models, a tool-offering chat, bad requests."""
    import openai
    import pytest

    client = openai.OpenAI(base_url=served, api_key="unused")
    assert [m.id for m in client.models.list().data] == ["tiny"]
    tools = [
        {
            "type": "function",
            "function": {
                "name": "bash",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
            },
        }
    ]
    response = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "list files"}],
        tools=tools,
        max_tokens=16,
        temperature=0.0,
        seed=0,
    )
    choice = response.choices[0]
    assert choice.finish_reason in ("stop", "length", "tool_calls") and response.usage.completion_tokens > 0
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="tiny", messages="not a list", max_tokens=4)
    request = urllib.request.Request(
        f"{served}/chat/completions", data=b"{not json", headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request)
    assert caught.value.code == 400 and "error" in json.loads(caught.value.read())

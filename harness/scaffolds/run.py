"""One episode driven by a scaffold program: start it against the intercepting endpoint and the
episode's sandbox, watch it, stop it, and turn what the endpoint recorded into the trajectory.

The program ends the episode by submitting (then it may exit), by exiting, or by being stopped:
past the episode's time limit (`episode_timeout`; exit status `wall_time`), past its output limit
(`output_limit`), or when the endpoint ends the episode (`max_turns`, `context_exceeded`,
`policy_error`, `sandbox_error`). An exit without a submission is `no_submit` (status 0) or
`scaffold_error` (any other status, with the tail of its output). Its whole process group is killed whatever the ending.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..episode import EpisodeEnd
from ..policies.scripted import ScriptedPolicy
from . import PROGRAMS
from .intercept import EpisodeEndpoint, intercept_server

if TYPE_CHECKING:
    from . import Scaffold

SUBMIT_GRACE = 10.0  # seconds a scaffold may take to exit once it submitted
LOG = "scaffold.log"
# Kills the scaffold's process group (argv[1]) when its stdin, a pipe from the harness, closes without a byte:
# the harness died, even by SIGKILL, so nothing of it outlives the harness.
WATCHDOG = "import os,signal,sys\nif not os.read(0, 1):\n    try: os.killpg(int(sys.argv[1]), signal.SIGKILL)\n    except OSError: pass\n"

_LIVE: set[int] = set()  # process groups of running scaffolds, killed at exit
_LIVE_LOCK = threading.Lock()


@dataclass
class Exit:
    code: int | None  # None: stopped by us
    timed_out: bool = False
    flooded: bool = False


def drive(
    scaffold: "Scaffold",
    task,
    policy,
    env,
    messages,
    sampling,
    limits,
    trajectory,
    started: float,
    artifacts: Path | None = None,
) -> None:
    """Run the episode's turns through `scaffold`; raises EpisodeEnd with how it ended."""
    max_turns = limits.max_turns or task.max_turns
    endpoint = EpisodeEndpoint(
        policy,
        sampling,
        env.sandbox,
        max_turns,
        limits.max_context,
        limits.command_timeout,
        express=scaffold.express if isinstance(policy, ScriptedPolicy) else None,
    )
    server = intercept_server()
    key = server.open(endpoint)
    with tempfile.TemporaryDirectory(prefix="harness-scaffold-") as scratch:
        folder = artifacts or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        record = _task_record(task, messages, max_turns, limits.command_timeout)
        (folder / "task.json").write_text(json.dumps({**record, "sample": trajectory.sample}))
        variables = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": scratch,
            "PYTHONPATH": str(PROGRAMS),
            "PYTHONUNBUFFERED": "1",
            "OPENAI_BASE_URL": f"{server.url}/v1",
            "OPENAI_API_KEY": key,
            "HARNESS_MODEL": endpoint.model_name,
            "HARNESS_SHELL_URL": f"{server.url}/harness",
            "HARNESS_TASK_FILE": str(folder / "task.json"),
            "HARNESS_OUTPUT_DIR": str(folder),
        }
        deadline = started + limits.episode_timeout
        try:
            outcome = launch(
                scaffold.argv(),
                variables,
                folder,
                deadline,
                scaffold.output_limit,
                stop=lambda: endpoint.submitted or bool(endpoint.ended),
            )
        finally:
            server.close_episode(key)
        tail = _tail(folder / LOG)
    _record(trajectory, endpoint, scaffold, outcome, artifacts)
    raise _ending(endpoint, outcome, tail, scaffold.output_limit)


def _task_record(task, messages, max_turns: int, command_timeout: float) -> dict:
    instance = task.metadata.get("instance") or {}
    users = [m["content"] for m in messages if m.get("role") == "user" and isinstance(m.get("content"), str)]
    return {
        "id": task.id,
        "statement": instance.get("problem_statement") or (users[-1] if users else ""),
        "prompt": messages,
        "workdir": instance.get("workdir") or (task.sandbox.workdir if task.sandbox else "/"),
        "max_turns": max_turns,
        "command_timeout": command_timeout,
    }


def launch(
    argv: list[str], variables: dict[str, str], folder: Path, deadline: float, output_limit: int, stop=lambda: False
) -> Exit:
    """Run the program until it exits, `deadline` (monotonic) passes, it writes more than `output_limit`
    bytes, or `stop()` holds for SUBMIT_GRACE seconds; then kill its process group."""
    try:
        process = subprocess.Popen(
            argv,
            env=variables,
            cwd=folder,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as err:
        (folder / LOG).write_text(f"cannot start {argv[0]}: {err}\n")
        return Exit(127)
    watch, alive = os.pipe()
    watchdog = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", WATCHDOG, str(process.pid)],
        stdin=watch,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    os.close(watch)
    with _LIVE_LOCK:
        _LIVE.add(process.pid)
    flooded = threading.Event()
    reader = threading.Thread(target=_keep_output, args=(process, folder / LOG, output_limit, flooded), daemon=True)
    reader.start()
    outcome = Exit(None)
    stopping_since = None
    try:
        while True:
            try:
                outcome.code = process.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if flooded.is_set():
                outcome.flooded = True
                break
            if now > deadline:
                outcome.timed_out = True
                break
            if stop():
                stopping_since = stopping_since or now
                if now - stopping_since > SUBMIT_GRACE:
                    break
    finally:
        _kill_group(process.pid)
        process.wait()
        os.write(alive, b"x")  # the group is gone: the watchdog leaves without killing (its id may be reused)
        os.close(alive)
        watchdog.wait()
        reader.join(timeout=5)
        with _LIVE_LOCK:
            _LIVE.discard(process.pid)
    outcome.flooded = outcome.flooded or flooded.is_set()
    return outcome


def _keep_output(process: subprocess.Popen, path: Path, limit: int, flooded: threading.Event) -> None:
    written = 0
    with open(path, "wb") as log:
        while True:
            chunk = os.read(process.stdout.fileno(), 1 << 16)
            if not chunk:
                break
            if written < limit:
                log.write(chunk[: limit - written])
                log.flush()
            written += len(chunk)
            if written > limit and not flooded.is_set():
                flooded.set()
                _kill_group(process.pid)
    process.stdout.close()


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@atexit.register
def stop_all() -> None:
    """Kill every scaffold this process runs (Ctrl-C, exit): their episodes end at once."""
    with _LIVE_LOCK:
        for pid in list(_LIVE):
            _kill_group(pid)


def _tail(path: Path, size: int = 2000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-size:].decode("utf-8", errors="replace")


def _record(trajectory, endpoint: EpisodeEndpoint, scaffold: "Scaffold", outcome: Exit, artifacts: Path | None) -> None:
    record = endpoint.token_record()
    if endpoint.messages:
        trajectory.messages = endpoint.messages
    trajectory.turns = len(endpoint.calls)
    trajectory.completion_tokens = sum(c["completion_tokens"] for c in endpoint.calls)
    trajectory.prompt_tokens = sum(c["prompt_length"] for c in endpoint.calls)
    for name in ("token_ids", "loss_mask", "logprobs"):
        setattr(trajectory, name, record.pop(name, None))
    trajectory.timings["policy_s"] += sum(c["policy_s"] for c in endpoint.calls)
    trajectory.timings["env_s"] += sum(r.get("duration") or 0.0 for r in endpoint.commands)
    # per turn, as our loop keeps them (the viewer; the trainer's filter_truncated reads the finish reason)
    trajectory.metadata["turn_stats"] = [
        {
            "policy_s": c["policy_s"],
            "env_s": round(sum(r.get("duration") or 0.0 for r in endpoint.commands if r["after_call"] == c["call"]), 4),
            "prompt_tokens": c["prompt_length"],
            "completion_tokens": c["completion_tokens"],
            "finish_reason": c["finish_reason"],
        }
        for c in endpoint.calls
    ]
    trajectory.metadata["scaffold"] = {
        "name": scaffold.name,
        "exit_code": outcome.code,
        "artifacts": str(artifacts) if artifacts else None,
        **record,
    }


def _ending(endpoint: EpisodeEndpoint, outcome: Exit, tail: str, output_limit: int) -> EpisodeEnd:
    if endpoint.submitted:
        return EpisodeEnd("submitted")
    if endpoint.ended:
        return EpisodeEnd(endpoint.ended, endpoint.error)
    if outcome.timed_out:
        return EpisodeEnd("wall_time", "the scaffold was still running at the episode's wall-time limit")
    if outcome.flooded:
        return EpisodeEnd("output_limit", f"the scaffold wrote more than {output_limit} bytes of output")
    if len(endpoint.calls) >= endpoint.max_turns:
        return EpisodeEnd("max_turns")
    if outcome.code != 0:
        return EpisodeEnd("scaffold_error", f"the scaffold exited with status {outcome.code}: {tail[-800:]}")
    return EpisodeEnd("no_submit", "the scaffold exited without submitting")

"""Trajectories in other formats: written by other agent scaffolds and read into ours, or ours written out.

mini-swe-agent (`*.traj.json`, `trajectory_format: mini-swe-agent-1`) keeps a plain chat: each
assistant message holds one bash code block, the command it runs; the next user message holds
its output (`<returncode>...</returncode><output>...`), and `info.submission` is the final diff.
Read into ours, each command becomes a `bash` tool call and each output its tool message, so the
viewer, search and the exploit audit read them as they read our own episodes.

Written out: a run's trajectories in a format registered in `TRAJECTORY_WRITERS` (`atif`: Harbor's
ATIF, `harness.atif`), one file per trajectory.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infra.plugins import Registry

from .atif import to_atif
from .errors import HarnessError
from .trajectory import Trajectory

MINI_SWE_AGENT_ACTION = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)  # the scaffold's own action rule
TRAJECTORY_SUFFIXES = (".traj.json", ".traj.json.gz")


class TrajectoryFormatError(HarnessError):
    pass


def read_trajectory_file(path: str | Path) -> dict[str, Any]:
    """A scaffold's trajectory file (gzip'd or not) in our format."""
    path = Path(path)
    try:
        raw = gzip.open(path, "rt").read() if path.name.endswith(".gz") else path.read_text()
        data = json.loads(raw)
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise TrajectoryFormatError(f"{path} is not a readable trajectory: {err}") from err
    if not isinstance(data, dict) or not str(data.get("trajectory_format", "")).startswith("mini-swe-agent"):
        raise TrajectoryFormatError(
            f"{path}: unknown trajectory format {data.get('trajectory_format') if isinstance(data, dict) else None!r}"
            " (read: mini-swe-agent-1)"
        )
    return from_mini_swe_agent(data, default_id=path.name.split(".traj.json")[0])


def from_mini_swe_agent(data: dict[str, Any], default_id: str = "") -> dict[str, Any]:
    info = data.get("info") or {}
    messages: list[dict[str, Any]] = []
    pending = ""  # the id of the command whose output the next user message holds
    for message in data.get("messages") or []:
        role, content = message.get("role"), message.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        if role == "assistant":
            actions = MINI_SWE_AGENT_ACTION.findall(text)
            pending = ""
            converted: dict[str, Any] = {"role": "assistant", "content": text}
            if len(actions) == 1:  # the scaffold runs exactly one block; any other count is a format error
                pending = f"call_{len(messages)}"
                converted["tool_calls"] = [
                    {
                        "id": pending,
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": actions[0]})},
                    }
                ]
            messages.append(converted)
        elif role == "user" and pending:
            messages.append({"role": "tool", "tool_call_id": pending, "content": text})
            pending = ""
        else:
            messages.append({"role": role, "content": text})
    return {
        "task_id": str(data.get("instance_id") or default_id),
        "policy": ((info.get("config") or {}).get("model") or {}).get("model_name", ""),
        "messages": messages,
        "model_patch": info.get("submission") or "",
        "exit_status": info.get("exit_status", ""),
        "turns": sum(m["role"] == "assistant" for m in messages),
        "metadata": {
            "scaffold": {"name": "mini-swe-agent", "version": info.get("mini_version", "")},
            "workdir": "/testbed",
            # its submission is the scaffold's own `git diff` against the base commit: it carries what the
            # environment's install step changed too (SWE-bench's sphinx images edit tox.ini)
            "patch_against": "base_commit",
        },
    }


def trajectory_files(folder: str | Path) -> list[Path]:
    """Every scaffold trajectory file under `folder`, in a stable order."""
    return sorted(p for p in Path(folder).rglob("*") if p.is_file() and p.name.endswith(TRAJECTORY_SUFFIXES))


# -- writing ---------------------------------------------------------------------------------------

TrajectoryWriter = Callable[[Trajectory], dict[str, Any]]
TRAJECTORY_WRITERS: Registry[TrajectoryWriter] = Registry("trajectory format", "harness.trajectory_formats")
TRAJECTORY_WRITERS.register("atif", to_atif)


OWN_FORMAT = "harness"  # our own trajectory JSON, always written; any other format is written beside it


def check_format(name: str) -> str:
    """`name` where it is ours or a registered writer's, else a TrajectoryFormatError naming the known ones."""
    if name != OWN_FORMAT and name not in TRAJECTORY_WRITERS:
        known = ", ".join([OWN_FORMAT, *TRAJECTORY_WRITERS.names()])
        raise TrajectoryFormatError(f"unknown trajectory format {name!r} (known: {known})")
    return name


def write_trajectory(trajectory: Trajectory, format_name: str, target: str | Path) -> Path:
    """One trajectory written in `format_name` at `target`."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(TRAJECTORY_WRITERS.get(format_name)(trajectory), indent=1))
    return target


def export_trajectories(run_dir: str | Path, format_name: str, output: str | Path | None = None) -> list[Path]:
    """Every trajectory of an eval run (`run_dir/trajectories/*.json`) written in `format_name`, one JSON file
    each under `output` (default `run_dir/<format_name>/`), same file names."""
    run_dir = Path(run_dir)
    sources = sorted((run_dir / "trajectories").glob("*.json"))
    if not sources:
        raise TrajectoryFormatError(f"{run_dir} holds no trajectories (trajectories/*.json): is it an eval run?")
    TRAJECTORY_WRITERS.get(format_name)  # an unknown format fails before anything is written
    output = Path(output) if output else run_dir / format_name
    written = []
    for source in sources:
        try:
            trajectory = Trajectory.from_dict(json.loads(source.read_text()))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, TypeError) as err:
            raise TrajectoryFormatError(f"{source} is not a readable trajectory: {err}") from err
        written.append(write_trajectory(trajectory, format_name, output / source.name))
    return written

"""Run directories that know what they are: `harness eval` and `harness grade` record what a run
is (its identity: policy, task set, sampling, limits, the predictions' content hash, ...) in
`run.json` when it starts. Finishing it (`--resume`, or rerunning `grade`) with anything different
is refused with what differs; `--force` sets the old run aside and starts a new one.

The results JSONL itself and atomic writes are `infra/runlog.py`'s.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any

from .errors import InfraError
from .runlog import atomic_write

RUN_FILE = "run.json"
RESULTS = "results.jsonl"


class RunMismatch(InfraError):
    """A run directory holds a different run than the one asked for."""


def content_hash(data: bytes | str) -> str:
    """sha256 of `data`, as `sha256:<hex>`."""
    return "sha256:" + hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def safe_name(text: str) -> str:
    """`text` as a file name: itself where every character is safe, else its safe characters with a hash of
    `text` appended, so names that differ only in unsafe characters (`x-😀`, `x-🔥`) never share a file."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in text)
    if safe != text or safe.startswith("."):
        safe = f"{safe}-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:10]}"
    return safe


def open_run(
    out: Path,
    kind: str,
    identity: dict[str, Any],
    resume: bool,
    force: bool = False,
    resume_flag: str = "--resume",
    check_only: bool = False,
) -> bool:
    """Prepare run directory `out` for the run `identity`; True when it continues an earlier run.

    - empty or new folder: a new run; `run.json` records `identity`;
    - the same run already there: continued when `resume`, else refused (say `resume_flag`);
    - a different run, or one that recorded nothing: refused with what differs, unless `force`,
      which moves the old folder to `<out>.old-<time>` and starts afresh.

    `check_only`: refuse what would be refused, change nothing (before an expensive model load).
    """
    recorded_path = out / RUN_FILE
    started = recorded_path.exists() or (out / RESULTS).exists()
    if check_only and (force or not started):
        return started and not force
    if started and force:
        aside = out.with_name(f"{out.name}.old-{time.strftime('%Y%m%d-%H%M%S')}")
        out.rename(aside)
        started = False
    if not started:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write(recorded_path, json.dumps({"kind": kind, "identity": identity, "created": time.time()}, indent=1))
        return False
    recorded = _read_recorded(recorded_path)
    if recorded is None:
        raise RunMismatch(
            f"{out} holds results of a run that recorded no identity: pass --force to set it aside and start anew, or choose another --output"
        )
    differences = describe_differences(recorded.get("identity", {}), identity)
    if recorded.get("kind") != kind:
        differences.insert(0, f"kind: {recorded.get('kind')!r} there, {kind!r} now")
    if differences:
        raise RunMismatch(
            f"{out} holds a different run ({'; '.join(differences)}): pass --force to set it aside and start anew, or choose another --output"
        )
    if not resume:
        raise RunMismatch(
            f"{out} already holds results of this run: pass {resume_flag} to finish it, --force to start anew, or choose another --output"
        )
    return True


def describe_differences(recorded: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """`key: A there, B now` for every key whose value differs."""
    keys = list(recorded) + [k for k in wanted if k not in recorded]
    return [
        f"{k}: {_short(recorded.get(k))} there, {_short(wanted.get(k))} now"
        for k in keys
        if recorded.get(k) != wanted.get(k)
    ]


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _read_recorded(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None

"""The one append-only JSONL run log: eval results, grading results, the synthesis work log, training metrics.

Rows are appended as they happen (one whole line per write, under a lock), so a killed run loses at
most the row it was writing. That row may be left as a torn last line: readers skip lines that are not
JSON, and `drop_partial_line` cuts it before a resumed run appends, so the next row starts on a clean line.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()


def _lock(path: Path) -> threading.Lock:
    with _LOCKS_LOCK:
        return _LOCKS.setdefault(str(Path(path).resolve()), threading.Lock())


def drop_partial_line(path: Path) -> None:
    """Cut a last line left half-written by a killed run, so appends start on a clean line."""
    path = Path(path)
    if path.exists():
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            path.write_bytes(data[: data.rfind(b"\n") + 1])


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Every complete row; a line cut short by a kill (or otherwise not a JSON object) is skipped."""
    path = Path(path)
    rows = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                rows.append(row)
    return rows


def append_row(path: Path, row: dict[str, Any]) -> None:
    """Append one row as one line (thread-safe within the process)."""
    line = json.dumps(row) + "\n"
    with _lock(path), Path(path).open("a") as handle:
        handle.write(line)
        handle.flush()


def rewrite_rows(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Replace the log's rows at once (a rename: a kill leaves the old file or the new one, never half)."""
    with _lock(path):
        atomic_write(path, "".join(json.dumps(row) + "\n" for row in rows))


def atomic_write(path: str | Path, text: str) -> None:
    """Write `text` to `path` so that readers see the old file or the new one, never a torn one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

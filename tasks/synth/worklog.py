"""The resumable record of a run: one JSON line per decided candidate, appended as decided.

It lives in the work dir next to the output, with the baseline it was judged against. Both
belong to one project image and its test commands (the `key`): when that changes, the old
record is set aside and the run starts over. A line cut short by a kill is ignored.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from infra.runlog import append_row, drop_partial_line, read_rows
from .validate import Baseline


class WorkLog:
    def __init__(self, work: Path, key: str):
        self.path = work / "worklog.jsonl"
        self._baseline_path = work / "baseline.json"
        self._lock = threading.Lock()
        meta = work / "meta.json"
        if not meta.exists() or json.loads(meta.read_text()).get("key") != key:
            for stale in (self.path, self._baseline_path):
                if stale.exists():
                    stale.replace(stale.with_name(stale.name + ".stale"))
            meta.write_text(json.dumps({"key": key}) + "\n")
        drop_partial_line(self.path)  # the line a kill cut short
        self.entries: dict[str, dict] = {entry["id"]: entry for entry in read_rows(self.path)}

    def append(self, entry: dict) -> None:
        with self._lock:
            self.entries[entry["id"]] = entry
        append_row(self.path, entry)

    def baseline(self) -> Baseline | None:
        if not self._baseline_path.exists():
            return None
        return Baseline(**json.loads(self._baseline_path.read_text()))

    def save_baseline(self, baseline: Baseline) -> None:
        self._baseline_path.write_text(json.dumps(baseline.to_dict(), indent=1))

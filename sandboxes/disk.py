"""Disk limits that hold where the storage cannot enforce a size (overlay2 on ext4, plain folders).

A `DiskWatchdog` measures what a sandbox's writable layer holds on the host (the container's
overlay upper directory; the local backend's workspace and /tmp folders) several times a
second. Past the limit it calls `stop` once: the backend freezes the sandbox, removes it with
everything it wrote (so the host gets its space back at once) and the next call on the sandbox
raises `DiskLimitExceeded`. Writes between two measurements can overshoot the limit by what the
sandbox writes in one interval, so the watchdog trips at `TRIP_SHARE` of the limit.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)

INTERVAL = 0.05  # seconds between measurements (more when a measurement itself takes long)
TRIP_SHARE = 0.75  # of the limit: the headroom absorbs what is written between measurements


def tree_bytes(path: str | Path) -> int:
    """Bytes allocated on disk under `path` (hard links counted once; symlinks not followed)."""
    total, seen, stack = 0, set(), [str(path)]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if (info.st_dev, info.st_ino) in seen:
                    continue
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return total


class DiskWatchdog:
    """Calls `stop(used_bytes)` once when the folders `paths` hold more than the trip point."""

    def __init__(self, paths: list[Path], limit: int, stop: Callable[[int], None], name: str = "disk-watchdog"):
        self.paths = paths
        self.limit = limit
        self.trip = int(limit * TRIP_SHARE)
        self.stop = stop
        self.used = 0
        self.tripped = False
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._closed.is_set():
            started = time.monotonic()
            self.used = sum(tree_bytes(p) for p in self.paths)
            if self.used > self.trip and not self._closed.is_set():
                self.tripped = True
                try:
                    self.stop(self.used)
                except Exception:  # noqa: BLE001 - the sandbox may be gone already
                    log.exception("stopping a sandbox over its disk limit failed")
                return
            self._closed.wait(max(INTERVAL, 4 * (time.monotonic() - started)))

    def close(self) -> None:
        self._closed.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

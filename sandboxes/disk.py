"""Disk limits that hold where the storage cannot enforce a size (overlay2 on ext4, plain folders).

A `DiskWatchdog` measures what a sandbox's writable layer holds on the host (the container's
overlay upper directory; the local backend's workspace and /tmp folders). Past its trip point it
calls `stop` once: the backend freezes the sandbox, removes it with everything it wrote (so the
host gets its space back at once) and the next call on the sandbox raises `DiskLimitExceeded`.

Writes land in the page cache at memory speed (2.6 GB/s for one `dd` on these 2-core machines),
so a fixed polling period cannot hold a limit: 50 ms is 130 MB. The watchdog instead assumes the
sandbox writes at up to `MAX_WRITE_RATE` and sizes each wait so that, even at that rate, the next
measurement plus the stop it may trigger come before the limit. Close to the limit it measures
every `MIN_INTERVAL`; when even that is too slow, it stops the sandbox now. So the limit errs toward the host: on a
busy machine, where one measurement takes tens of milliseconds, a sandbox with a limit of a few hundred MB can be
stopped before it reaches it (100 MB leaves about 8 ms per measurement at the assumed rate).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)

MAX_WRITE_RATE = 4 * 2**30  # bytes a second a sandbox is assumed able to write
STOP_TIME = 0.005  # seconds from the decision to stop until the sandbox writes no more (freeze or kill)
MIN_INTERVAL, MAX_INTERVAL = 0.002, 0.5  # seconds between two measurements


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
    """Calls `stop(used_bytes)` once, before the folders `paths` can hold more than `limit` bytes."""

    def __init__(self, paths: list[Path], limit: int, stop: Callable[[int], None], name: str = "disk-watchdog"):
        self.paths = paths
        self.limit = limit
        self.stop = stop
        self.used = 0
        self.tripped = False
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:  # ahead of busy processes: a late wake-up is a late stop (needs root; nice is per thread)
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), -10)
        except OSError:
            pass
        while not self._closed.is_set():
            started = time.monotonic()
            self.used = sum(tree_bytes(p) for p in self.paths)
            cost = time.monotonic() - started
            # Until the next measurement ends and its stop takes effect, the sandbox may write for
            # this measurement, the wait, the next measurement and the stop.
            wait = (self.limit - self.used) / MAX_WRITE_RATE - 2 * cost - STOP_TIME
            if wait < MIN_INTERVAL:
                if not self._closed.is_set():
                    self.tripped = True
                    try:
                        self.stop(self.used)
                    except Exception:  # noqa: BLE001 - the sandbox may be gone already
                        log.exception("stopping a sandbox over its disk limit failed")
                return
            self._closed.wait(min(wait, MAX_INTERVAL))

    def close(self) -> None:
        self._closed.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

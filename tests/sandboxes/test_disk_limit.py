"""Sandbox disk limits on storage that cannot limit sizes itself.

A watchdog stops a sandbox of either backend past its `disk` limit; the host's free space never
drops by more.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from sandboxes import DiskLimitExceeded, SandboxSpec

# Large enough that a measurement slowed by a busy host (tens of ms) does not stop the sandbox before it writes
# anything: at the watchdog's assumed 4 GiB/s, 100 MiB leaves it about 8 ms per measurement, 300 MiB about 30 ms.
LIMIT_MB = 300


def _free_bytes() -> int:
    stats = os.statvfs("/")
    return stats.f_bavail * stats.f_frsize


def test_writing_past_the_disk_limit_stops_the_sandbox_and_spares_the_host(backend):
    sandbox = backend.create(SandboxSpec(disk=f"{LIMIT_MB}m"))
    small = sandbox.exec("head -c 10M /dev/zero > small && echo ok", timeout=60)
    assert small.output.strip() == "ok"  # under the limit, nothing happens
    before, lowest, done = _free_bytes(), [_free_bytes()], threading.Event()

    def watch_host():
        while not done.is_set():
            lowest[0] = min(lowest[0], _free_bytes())
            time.sleep(0.002)

    watcher = threading.Thread(target=watch_host)
    watcher.start()
    try:
        with pytest.raises(DiskLimitExceeded, match="disk limit"):
            sandbox.exec("dd if=/dev/zero of=big bs=1M count=2000; sync", timeout=120)  # 2 GB
        with pytest.raises(DiskLimitExceeded):
            sandbox.exec("echo still here?")
    finally:
        done.set()
        watcher.join()
        sandbox.close()
    dropped_mb = (before - lowest[0]) / 2**20
    assert dropped_mb <= LIMIT_MB, f"the host lost {dropped_mb:.0f} MiB with a {LIMIT_MB} MiB limit"

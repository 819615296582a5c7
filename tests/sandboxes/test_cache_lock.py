"""Processes building the same cache entry take turns (the base image's root filesystem, a swe-demo instance)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

HOLD = """
import sys, time
from pathlib import Path
from sandboxes.cache_lock import cache_lock
entry, log = Path(sys.argv[1]), Path(sys.argv[2])
with cache_lock(entry):
    with log.open("a") as out:
        out.write(f"start {time.monotonic()}\\n")
    time.sleep(0.4)
    with log.open("a") as out:
        out.write(f"end {time.monotonic()}\\n")
"""


def test_builders_of_one_entry_take_turns_and_of_another_do_not_wait(tmp_path):
    log = tmp_path / "log"
    holders = [
        subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "cache" / "entry"), str(log)], cwd=ROOT)
        for _ in range(3)
    ]
    assert all(p.wait(timeout=60) == 0 for p in holders)
    events = [line.split()[0] for line in log.read_text().splitlines()]
    assert events == ["start", "end"] * 3  # never two inside at once
    from sandboxes.cache_lock import cache_lock

    with cache_lock(tmp_path / "cache" / "entry"), cache_lock(tmp_path / "cache" / "entry", "import"):
        pass  # another purpose on the same entry is another lock: no deadlock within one process

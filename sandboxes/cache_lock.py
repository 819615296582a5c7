"""A lock that every process building the same cache entry shares: `flock` on a file beside the entry.

Two runs that build the base image's root filesystem, or one swe-demo instance, at the same time
would otherwise write into the same staging folder and break each other's build; the second one
waits, then finds the entry complete.
"""

from __future__ import annotations

import fcntl
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def cache_lock(entry: Path, purpose: str = "build") -> Iterator[None]:
    """Hold `<entry>.<purpose>.lock` exclusively (released when the block ends or the process dies)."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    with open(entry.with_name(f"{entry.name}.{purpose}.lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

"""A warm pool: sandboxes started ahead of time for one spec, handed out at once."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

from .base import Backend, Sandbox
from .spec import SandboxSpec

log = logging.getLogger(__name__)


class SandboxPool:
    """Keeps up to `size` started sandboxes of `spec`; a background thread refills it.

    `acquire()` returns a warm sandbox when one is ready, else creates one on the spot.
    A sandbox that waited longer than `max_idle` seconds is replaced, so what is handed out
    always has its full wall-clock budget left.
    """

    def __init__(self, backend: Backend, spec: SandboxSpec, size: int = 4, max_idle: float | None = None):
        if size < 1:
            raise ValueError("a pool needs size >= 1")
        self.backend = backend
        self.spec = spec
        self.size = size
        self.max_idle = spec.wall_time if max_idle is None else max_idle
        self._ready: deque[tuple[float, Sandbox]] = deque()
        self._wake = threading.Condition()
        self._closed = False
        self.errors = 0
        self._filler = threading.Thread(target=self._fill, name="sandbox-pool", daemon=True)
        self._filler.start()

    def acquire(self) -> Sandbox:
        with self._wake:
            if self._closed:
                raise RuntimeError("the pool is closed")
            item = self._ready.popleft() if self._ready else None
            self._wake.notify()
        if item is None:
            return self.backend.create(self.spec)
        sandbox = item[1]
        sandbox.deadline = time.monotonic() + self.spec.wall_time
        return sandbox

    def wait_ready(self, timeout: float = 60.0) -> bool:
        """Block until the pool is full (for benchmarks and warm-up)."""
        end = time.monotonic() + timeout
        with self._wake:
            while len(self._ready) < self.size and time.monotonic() < end:
                self._wake.wait(0.05)
            return len(self._ready) >= self.size

    def close(self) -> None:
        with self._wake:
            self._closed = True
            self._wake.notify_all()
        self._filler.join(timeout=60)
        while self._ready:
            self._ready.popleft()[1].close()

    def __enter__(self) -> "SandboxPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _fill(self) -> None:
        while True:
            with self._wake:
                while not self._closed and len(self._ready) >= self.size and not self._stale():
                    self._wake.wait(1.0)
                if self._closed:
                    return
                stale = [s for t, s in self._ready if time.monotonic() - t > self.max_idle]
                self._ready = deque((t, s) for t, s in self._ready if s not in stale)
            for sandbox in stale:
                sandbox.close()
            try:
                sandbox = self.backend.create(self.spec)
            except Exception as err:
                self.errors += 1
                log.warning("the pool could not start a sandbox (%s); retrying in 1s", err)
                time.sleep(1.0)
                continue
            with self._wake:
                if self._closed:
                    sandbox.close()
                    return
                self._ready.append((time.monotonic(), sandbox))
                self._wake.notify_all()

    def _stale(self) -> bool:
        return bool(self._ready) and time.monotonic() - self._ready[0][0] > self.max_idle

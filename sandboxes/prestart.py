"""Sandboxes started ahead of a known queue: the eval driver says which specs its next jobs
will create, in order; background threads start them while the current episodes run.

`PrestartBackend` wraps a backend. Its `create(spec)` hands out a started sandbox of an equal
spec when one is ready (or waits for one being started), else creates one on the spot, so it
is a drop-in backend for episodes and graders alike. Bounds: at most `per_image` sandboxes of
one image and `total` in all are ready or starting at any time; the first queued spec with
room is started next. Specs are matched ignoring
`wall_time`; the deadline restarts at hand-out (the container's own lifetime leaves room).

A job that ends without creating everything it announced (an episode that failed before
grading) gives its leftovers back with `job(specs)`: those are closed or never started, so the
bounds keep serving the next jobs. `close()` removes every sandbox not handed out, including
those still starting; nothing is left running however the run ends.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter, deque
from contextlib import contextmanager
from dataclasses import replace
from typing import Iterable, Iterator

from .base import Backend, Sandbox, Snapshot
from .spec import SandboxSpec

log = logging.getLogger(__name__)


Key = tuple[str, str]  # (image, the rest of the spec as JSON)


def spec_key(spec: SandboxSpec) -> Key:
    """What makes two specs interchangeable for a pre-started sandbox: everything but the wall time."""
    return spec.image, json.dumps(replace(spec, wall_time=0.0).to_dict(), sort_keys=True)


class PrestartBackend(Backend):
    def __init__(
        self,
        backend: Backend,
        upcoming: Iterable[SandboxSpec],
        per_image: int = 2,
        total: int | None = None,
        starters: int = 2,
    ):
        if per_image < 1:
            raise ValueError(f"per_image must be >= 1, not {per_image}")
        if total is not None and total < 1:
            raise ValueError(f"total must be >= 1 (or None), not {total}")
        if starters < 1:
            raise ValueError(f"starters must be >= 1, not {starters}")
        self.backend = backend
        self.name = backend.name
        self.per_image = per_image
        self.total = total
        self._queue: deque[SandboxSpec] = deque(upcoming)
        self._ready: dict[Key, deque[Sandbox]] = {}
        self._starting: Counter[Key] = Counter()
        self._unwanted: Counter[Key] = Counter()  # starting ones to close on arrival
        self._lock = threading.Condition()
        self._closed = False
        self._local = threading.local()
        self.stats = Counter()  # prestarted, handed_out, cold, discarded, errors
        self.peak = 0  # most sandboxes ready or starting at once
        self.peak_per_image = 0
        self._threads = [
            threading.Thread(target=self._start_loop, name=f"prestart-{i}", daemon=True) for i in range(starters)
        ]
        for thread in self._threads:
            thread.start()

    # -- the Backend interface ------------------------------------------------------------

    def create(self, spec: SandboxSpec) -> Sandbox:
        key = spec_key(spec)
        with self._lock:
            if self._closed:
                raise RuntimeError("the pre-start pool is closed")
            announced = self._note_consumed(key)
            if announced and not self._ready.get(key) and not self._live_starting(key):
                self._drop_queued(key)  # asked for before its turn came: never start it now
            while not self._ready.get(key) and self._live_starting(key) and not self._closed:
                self._lock.wait(0.05)  # being started right now: cheaper to wait than to start another
            sandbox = self._ready[key].popleft() if self._ready.get(key) else None
            self._lock.notify_all()
        if sandbox is None:
            self.stats["cold"] += 1
            return self.backend.create(spec)
        self.stats["handed_out"] += 1
        sandbox.spec = spec
        sandbox.deadline = time.monotonic() + spec.wall_time
        return sandbox

    def has_image(self, image: str) -> bool:
        return self.backend.has_image(image)

    def fork(self, snapshot: Snapshot, n: int) -> list[Sandbox]:
        return self.backend.fork(snapshot, n)

    def remove_snapshot(self, snapshot: Snapshot) -> None:
        self.backend.remove_snapshot(snapshot)

    def prune(self, everything: bool = False) -> list[str]:
        return self.backend.prune(everything)

    def list(self) -> list[dict]:
        return self.backend.list()

    def images(self) -> list[dict]:
        return self.backend.images()

    def pull(self, image: str, on_progress=lambda p: None) -> str:
        return self.backend.pull(image, on_progress)

    # -- jobs -----------------------------------------------------------------------------

    @contextmanager
    def job(self, specs: Iterable[SandboxSpec]) -> Iterator[None]:
        """Run one job in this thread: the announced `specs` it did not create are given back at the end."""
        expected = Counter(spec_key(s) for s in specs)
        self._local.expected = expected
        try:
            yield
        finally:
            self._local.expected = None
            with self._lock:
                unused = [s for key, count in expected.items() for _ in range(count) if (s := self._give_back(key))]
                self._lock.notify_all()
            for sandbox in unused:
                self._close_quietly(sandbox)

    def ready_count(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._ready.values())

    def wait_idle(self, timeout: float = 60.0) -> bool:
        """Block until nothing is being started (for tests and benchmarks)."""
        end = time.monotonic() + timeout
        with self._lock:
            while (sum(self._starting.values()) or self._next() is not None) and time.monotonic() < end:
                self._lock.wait(0.05)
            return not sum(self._starting.values())

    # -- closing --------------------------------------------------------------------------

    def close(self) -> None:
        """Stop starting; remove every sandbox not handed out (those starting are removed on arrival)."""
        with self._lock:
            self._closed = True
            self._queue.clear()
            leftovers = [s for q in self._ready.values() for s in q]
            self._ready.clear()
            self._lock.notify_all()
        for sandbox in leftovers:
            self._close_quietly(sandbox)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=120)

    def __enter__(self) -> "PrestartBackend":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- inside ---------------------------------------------------------------------------

    def _note_consumed(self, key: Key) -> bool:
        """Whether this thread's job announced a sandbox of `key` (and now has it)."""
        expected = getattr(self._local, "expected", None)
        if expected and expected[key] > 0:
            expected[key] -= 1
            return True
        return False

    def _live_starting(self, key: Key) -> int:
        return self._starting[key] - self._unwanted[key]

    def _drop_queued(self, key: Key) -> bool:
        for i, queued in enumerate(self._queue):
            if spec_key(queued) == key:
                del self._queue[i]
                return True
        return False

    def _give_back(self, key: Key) -> Sandbox | None:
        """A job will not create this after all: unqueue it, or take out one ready (returned, to be
        closed) or mark one starting as unwanted."""
        if self._drop_queued(key):
            return None
        if self._ready.get(key):
            self.stats["discarded"] += 1
            return self._ready[key].pop()
        if self._live_starting(key):
            self._unwanted[key] += 1
        return None

    def _in_use(self, image: str | None = None) -> int:
        ready = sum(len(q) for k, q in self._ready.items() if image is None or k[0] == image)
        return ready + sum(n for k, n in self._starting.items() if image is None or k[0] == image)

    def _room_for(self, spec: SandboxSpec) -> bool:
        return self._in_use(spec.image) < self.per_image and (self.total is None or self._in_use() < self.total)

    def _next(self) -> int | None:
        """The first queued spec there is room to start (a full image does not hold back the next ones)."""
        if self.total is not None and self._in_use() >= self.total:
            return None
        full: set[str] = set()
        for index, spec in enumerate(self._queue):
            if spec.image not in full:
                if self._room_for(spec):
                    return index
                full.add(spec.image)
        return None

    def _start_loop(self) -> None:
        while True:
            with self._lock:
                while not self._closed and (index := self._next()) is None:
                    self._lock.wait(0.5)
                if self._closed:
                    return
                spec = self._queue[index]
                del self._queue[index]
                key = spec_key(spec)
                self._starting[key] += 1
                self.peak = max(self.peak, self._in_use())
                self.peak_per_image = max(self.peak_per_image, self._in_use(spec.image))
            sandbox = None
            try:
                sandbox = self.backend.create(spec)
            except Exception as err:  # noqa: BLE001 - the job's own create will meet (and report) it
                self.stats["errors"] += 1
                log.warning("could not pre-start a sandbox of %s: %s", spec.image, err)
            with self._lock:
                self._starting[key] -= 1
                unwanted = self._unwanted[key] > 0
                if unwanted:
                    self._unwanted[key] -= 1
                keep = sandbox is not None and not self._closed and not unwanted
                if keep:
                    self._ready.setdefault(key, deque()).append(sandbox)
                    self.stats["prestarted"] += 1
                self._lock.notify_all()
            if sandbox is not None and not keep:
                self.stats["discarded"] += 1
                self._close_quietly(sandbox)

    @staticmethod
    def _close_quietly(sandbox: Sandbox) -> None:
        try:
            sandbox.close()
        except Exception as err:  # noqa: BLE001 - keep closing the others
            log.warning("could not remove pre-started %r: %s", sandbox, err)

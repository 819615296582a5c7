"""Clocks: where time-dependent objects get "now" from."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds on a monotonic scale (only differences matter)."""


class MonotonicClock:
    """The real clock (``time.monotonic``)."""

    def now(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that only moves when told to; for tests and simulations."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("a clock cannot go backwards")
        self._now += seconds
        return self._now

    def set(self, when: float) -> None:
        if when < self._now:
            raise ValueError("a clock cannot go backwards")
        self._now = float(when)

"""Rate limiters: a token bucket and a sliding-window counter."""

from __future__ import annotations

from collections import deque

from .clock import Clock, MonotonicClock


class TokenBucket:
    """``capacity`` tokens, refilled continuously at ``rate`` tokens/second.

    The bucket starts full. ``try_acquire(n)`` takes ``n`` tokens if they
    are there and says whether it did.
    """

    def __init__(self, rate: float, capacity: float, *, clock: Clock | None = None) -> None:
        if rate <= 0:
            raise ValueError("rate must be positive")
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.rate = float(rate)
        self.capacity = float(capacity)
        self.clock = clock or MonotonicClock()
        self._tokens = self.capacity
        self._last = self.clock.now()

    def _refill(self) -> None:
        now = self.clock.now()
        elapsed = now - self._last
        if elapsed > 0:
            self._tokens = min(self.capacity, self._tokens + elapsed * self.rate)
            self._last = now

    @property
    def tokens(self) -> float:
        self._refill()
        return self._tokens

    def try_acquire(self, n: float = 1) -> bool:
        if n <= 0:
            raise ValueError("n must be positive")
        if n > self.capacity:
            raise ValueError(f"cannot take {n} tokens from a bucket of {self.capacity:g}")
        self._refill()
        if self._tokens >= n:
            self._tokens -= n
            return True
        return False

    def wait_time(self, n: float = 1) -> float:
        """Seconds until ``n`` tokens will be available (0 if they are now)."""
        if n > self.capacity:
            raise ValueError(f"cannot take {n} tokens from a bucket of {self.capacity:g}")
        self._refill()
        missing = n - self._tokens
        return 0.0 if missing <= 0 else missing / self.rate


class SlidingWindowLimiter:
    """At most ``limit`` events in any window of ``window`` seconds."""

    def __init__(self, limit: int, window: float, *, clock: Clock | None = None) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        if window <= 0:
            raise ValueError("window must be positive")
        self.limit = limit
        self.window = window
        self.clock = clock or MonotonicClock()
        self._events: deque[float] = deque()

    def _forget_old(self, now: float) -> None:
        # an event at time t counts for the window [t, t + window)
        while self._events and self._events[0] <= now - self.window:
            self._events.popleft()

    def try_acquire(self) -> bool:
        now = self.clock.now()
        self._forget_old(now)
        if len(self._events) < self.limit:
            self._events.append(now)
            return True
        return False

    def remaining(self) -> int:
        self._forget_old(self.clock.now())
        return self.limit - len(self._events)

    def retry_after(self) -> float:
        """Seconds until the next event would be allowed (0 if now)."""
        now = self.clock.now()
        self._forget_old(now)
        if len(self._events) < self.limit:
            return 0.0
        return self._events[0] + self.window - now

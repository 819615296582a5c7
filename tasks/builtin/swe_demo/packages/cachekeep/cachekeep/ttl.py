"""An LRU cache whose entries also expire after a time-to-live."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from .clock import Clock, MonotonicClock
from .lru import _MISSING, LRUCache


class TTLCache:
    """Entries live ``ttl`` seconds: an entry stored at time ``t`` is served
    while ``now < t + ttl`` and is gone from ``t + ttl`` on. Size is bounded
    like :class:`LRUCache`.
    """

    def __init__(self, maxsize: int = 128, ttl: float = 60.0, *, clock: Clock | None = None) -> None:
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        self.ttl = ttl
        self.clock = clock or MonotonicClock()
        self._lru = LRUCache(maxsize)

    @property
    def stats(self):
        return self._lru.stats

    def _expired(self, expires_at: float) -> bool:
        return self.clock.now() >= expires_at

    def set(self, key: Hashable, value: Any, *, ttl: float | None = None) -> None:
        lifetime = self.ttl if ttl is None else ttl
        if lifetime <= 0:
            raise ValueError("ttl must be positive")
        self._lru.put(key, (self.clock.now() + lifetime, value))

    __setitem__ = set

    def get(self, key: Hashable, default: Any = None) -> Any:
        entry = self._lru.get(key, _MISSING)
        if entry is _MISSING:
            return default
        expires_at, value = entry
        if self._expired(expires_at):
            del self._lru[key]
            return default
        return value

    def __getitem__(self, key: Hashable) -> Any:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        entry = self._lru.peek(key, _MISSING)
        return entry is not _MISSING and not self._expired(entry[0])

    def ttl_remaining(self, key: Hashable) -> float | None:
        """Seconds until ``key`` expires, or None if absent or expired."""
        entry = self._lru.peek(key, _MISSING)
        if entry is _MISSING or self._expired(entry[0]):
            return None
        return entry[0] - self.clock.now()

    def purge(self) -> int:
        """Drop every expired entry; return how many were dropped."""
        dead = [k for k in self._lru.keys() if self._expired(self._lru.peek(k)[0])]
        for key in dead:
            del self._lru[key]
        return len(dead)

    def __len__(self) -> int:
        self.purge()
        return len(self._lru)

    def clear(self) -> None:
        self._lru.clear()

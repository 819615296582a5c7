"""A size-bounded least-recently-used cache."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any

_MISSING: Any = object()


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    evictions: int = 0

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class LRUCache:
    """Holds at most ``maxsize`` items; adding one more evicts the least
    recently used. Reads (``get``, ``[]``) and writes both count as a use;
    ``peek`` and ``in`` do not.

    ``on_evict(key, value)`` is called for items pushed out by size (not for
    explicit deletes).
    """

    def __init__(
        self, maxsize: int = 128, *, on_evict: Callable[[Hashable, Any], None] | None = None
    ) -> None:
        if not isinstance(maxsize, int) or maxsize < 1:
            raise ValueError("maxsize must be a positive int")
        self.maxsize = maxsize
        self.on_evict = on_evict
        self.stats = CacheStats()
        self._data: OrderedDict[Hashable, Any] = OrderedDict()

    # -- reads ----------------------------------------------------------
    def _lookup(self, key: Hashable) -> Any:
        try:
            value = self._data[key]
        except KeyError:
            self.stats.misses += 1
            return _MISSING
        self._data.move_to_end(key)
        self.stats.hits += 1
        return value

    def get(self, key: Hashable, default: Any = None) -> Any:
        value = self._lookup(key)
        return default if value is _MISSING else value

    def __getitem__(self, key: Hashable) -> Any:
        value = self._lookup(key)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def peek(self, key: Hashable, default: Any = None) -> Any:
        """Read without touching recency or statistics."""
        return self._data.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def __iter__(self) -> Iterator[Hashable]:
        """Keys from least to most recently used."""
        return iter(list(self._data))

    def keys(self) -> list[Hashable]:
        return list(self._data)

    # -- writes ---------------------------------------------------------
    def put(self, key: Hashable, value: Any) -> None:
        if key in self._data:
            self._data.move_to_end(key)
        self._data[key] = value
        self._shrink()

    __setitem__ = put

    def __delitem__(self, key: Hashable) -> None:
        del self._data[key]

    def pop(self, key: Hashable, default: Any = _MISSING) -> Any:
        if default is _MISSING:
            return self._data.pop(key)
        return self._data.pop(key, default)

    def clear(self) -> None:
        self._data.clear()

    def resize(self, maxsize: int) -> None:
        if not isinstance(maxsize, int) or maxsize < 1:
            raise ValueError("maxsize must be a positive int")
        self.maxsize = maxsize
        self._shrink()

    def _shrink(self) -> None:
        while len(self._data) > self.maxsize:
            key, value = self._data.popitem(last=False)
            self.stats.evictions += 1
            if self.on_evict is not None:
                self.on_evict(key, value)

"""A memoizing decorator that stores results in any cachekeep cache."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable
from typing import Any

from .lru import _MISSING, LRUCache


def make_key(args: tuple, kwargs: dict) -> Hashable:
    """Key for a call; keyword order does not matter."""
    if not kwargs:
        return args
    return (args, tuple(sorted(kwargs.items())))


def memoize(
    cache: Any = None, *, key: Callable[[tuple, dict], Hashable] = make_key
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Cache a function's results in ``cache`` (an LRUCache(128) if None).

    Any result is cached, ``None`` included. Exceptions are not cached. The
    wrapper exposes ``.cache`` and ``.cache_clear()``.
    """
    store = LRUCache(128) if cache is None else cache

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            k = key(args, kwargs)
            result = store.get(k, _MISSING)
            if result is _MISSING:
                result = fn(*args, **kwargs)
                store[k] = result
            return result

        wrapper.cache = store  # type: ignore[attr-defined]
        wrapper.cache_clear = store.clear  # type: ignore[attr-defined]
        return wrapper

    return decorator

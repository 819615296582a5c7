"""cachekeep: small caches and rate limiters with injectable clocks.

Every time-dependent object takes a ``clock`` (anything with ``now() ->
float`` seconds); tests pass a :class:`ManualClock` and never sleep.
"""

from .clock import Clock, ManualClock, MonotonicClock
from .lru import CacheStats, LRUCache
from .memoize import make_key, memoize
from .ratelimit import SlidingWindowLimiter, TokenBucket
from .ttl import TTLCache

__all__ = [
    "CacheStats",
    "Clock",
    "LRUCache",
    "ManualClock",
    "MonotonicClock",
    "SlidingWindowLimiter",
    "TTLCache",
    "TokenBucket",
    "make_key",
    "memoize",
]

__version__ = "0.1.0"

import pytest

from cachekeep import LRUCache, ManualClock, SlidingWindowLimiter, TokenBucket, TTLCache, make_key, memoize


def test_memoize_caches_results():
    calls = []

    @memoize()
    def square(x):
        calls.append(x)
        return x * x

    assert square(3) == 9
    assert square(3) == 9
    assert square(4) == 16
    assert calls == [3, 4]


def test_memoize_keyword_order_does_not_matter():
    calls = []

    @memoize()
    def f(a, b=0, c=0):
        calls.append((a, b, c))
        return a + b + c

    assert f(1, b=2, c=3) == f(1, c=3, b=2) == 6
    assert len(calls) == 1


def test_make_key():
    assert make_key((1, 2), {}) == (1, 2)
    assert make_key((1,), {"b": 1, "a": 2}) == make_key((1,), {"a": 2, "b": 1})


def test_memoize_with_custom_cache_and_clear():
    cache = LRUCache(1)

    @memoize(cache)
    def ident(x):
        return [x]

    first = ident(1)
    assert ident(1) is first
    ident(2)  # evicts 1
    assert ident(1) is not first
    ident.cache_clear()
    assert len(ident.cache) == 0


def test_memoize_does_not_cache_exceptions():
    attempts = []

    @memoize()
    def flaky(x):
        attempts.append(x)
        if len(attempts) == 1:
            raise RuntimeError("first call fails")
        return x

    with pytest.raises(RuntimeError):
        flaky(1)
    assert flaky(1) == 1
    assert attempts == [1, 1]


def test_memoize_with_ttl_cache():
    clock = ManualClock()
    calls = []

    @memoize(TTLCache(ttl=10, clock=clock))
    def now_value(x):
        calls.append(x)
        return len(calls)

    assert now_value("a") == 1
    assert now_value("a") == 1
    clock.advance(30)
    assert now_value("a") == 2


def test_memoize_keeps_metadata():
    @memoize()
    def documented():
        """Docs."""
        return 1

    assert documented.__name__ == "documented"
    assert documented.__doc__ == "Docs."


def test_token_bucket_burst_then_refill():
    clock = ManualClock()
    bucket = TokenBucket(rate=2, capacity=3, clock=clock)
    assert [bucket.try_acquire() for _ in range(4)] == [True, True, True, False]
    clock.advance(0.5)
    assert bucket.try_acquire()
    assert not bucket.try_acquire()


def test_token_bucket_never_exceeds_capacity():
    clock = ManualClock()
    bucket = TokenBucket(rate=1, capacity=2, clock=clock)
    clock.advance(1000)
    assert bucket.tokens == 2


def test_token_bucket_wait_time_and_errors():
    clock = ManualClock()
    bucket = TokenBucket(rate=4, capacity=4, clock=clock)
    assert bucket.wait_time(4) == 0
    assert bucket.try_acquire(4)
    assert bucket.wait_time(2) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        bucket.try_acquire(5)
    with pytest.raises(ValueError):
        bucket.try_acquire(0)
    with pytest.raises(ValueError):
        TokenBucket(rate=0, capacity=1, clock=clock)


def test_sliding_window():
    clock = ManualClock()
    limiter = SlidingWindowLimiter(limit=2, window=10, clock=clock)
    assert limiter.try_acquire()
    clock.advance(4)
    assert limiter.try_acquire()
    assert not limiter.try_acquire()
    assert limiter.remaining() == 0
    assert limiter.retry_after() == pytest.approx(6)
    clock.advance(6)  # the first event leaves the window exactly now
    assert limiter.remaining() == 1
    assert limiter.try_acquire()


def test_sliding_window_validation():
    with pytest.raises(ValueError):
        SlidingWindowLimiter(0, 1)
    with pytest.raises(ValueError):
        SlidingWindowLimiter(1, 0)

import pytest

from cachekeep import ManualClock, TTLCache


@pytest.fixture
def clock():
    return ManualClock(1000.0)


def test_values_are_served_before_expiry(clock):
    c = TTLCache(ttl=10, clock=clock)
    c["a"] = 1
    clock.advance(9.5)
    assert c["a"] == 1
    assert "a" in c


def test_values_expire(clock):
    c = TTLCache(ttl=10, clock=clock)
    c.set("a", 1)
    clock.advance(11)
    assert c.get("a") is None
    assert "a" not in c
    with pytest.raises(KeyError):
        c["a"]


def test_per_entry_ttl(clock):
    c = TTLCache(ttl=10, clock=clock)
    c.set("short", 1, ttl=1)
    c.set("long", 2)
    clock.advance(2)
    assert c.get("short", "gone") == "gone"
    assert c.get("long") == 2


def test_ttl_remaining(clock):
    c = TTLCache(ttl=10, clock=clock)
    c["a"] = 1
    clock.advance(4)
    assert c.ttl_remaining("a") == pytest.approx(6)
    assert c.ttl_remaining("missing") is None
    clock.advance(100)
    assert c.ttl_remaining("a") is None


def test_purge_and_len(clock):
    c = TTLCache(ttl=5, clock=clock)
    c["a"] = 1
    clock.advance(3)
    c["b"] = 2
    clock.advance(3)
    assert len(c) == 1
    assert c.purge() == 0
    clock.advance(10)
    assert c.purge() == 1


def test_size_bound_still_applies(clock):
    c = TTLCache(maxsize=2, ttl=100, clock=clock)
    for k in "abc":
        c[k] = k
    assert "a" not in c
    assert c.get("c") == "c"


def test_invalid_ttl(clock):
    with pytest.raises(ValueError):
        TTLCache(ttl=0, clock=clock)
    c = TTLCache(ttl=1, clock=clock)
    with pytest.raises(ValueError):
        c.set("a", 1, ttl=-1)


def test_resetting_a_key_restarts_its_ttl(clock):
    c = TTLCache(ttl=10, clock=clock)
    c["a"] = 1
    clock.advance(8)
    c["a"] = 2
    clock.advance(8)
    assert c.get("a") == 2


def test_manual_clock_refuses_to_go_back():
    clock = ManualClock(5)
    with pytest.raises(ValueError):
        clock.advance(-1)
    with pytest.raises(ValueError):
        clock.set(4)
    clock.set(7)
    assert clock.now() == 7

import pytest

from cachekeep import LRUCache


def test_put_and_get():
    c = LRUCache(2)
    c.put("a", 1)
    c["b"] = 2
    assert c.get("a") == 1
    assert c["b"] == 2
    assert len(c) == 2


def test_missing_keys():
    c = LRUCache(2)
    assert c.get("x") is None
    assert c.get("x", 0) == 0
    with pytest.raises(KeyError):
        c["x"]


def test_evicts_oldest_insert_when_full():
    c = LRUCache(2)
    c["a"] = 1
    c["b"] = 2
    c["c"] = 3
    assert "a" not in c
    assert c.keys() == ["b", "c"]


def test_overwrite_refreshes_recency():
    c = LRUCache(2)
    c["a"] = 1
    c["b"] = 2
    c["a"] = 10
    c["c"] = 3
    assert c.keys() == ["a", "c"]
    assert c.peek("a") == 10


def test_peek_and_contains_do_not_touch_recency_or_stats():
    c = LRUCache(2)
    c["a"] = 1
    c["b"] = 2
    assert c.peek("a") == 1
    assert "a" in c
    c["c"] = 3
    assert "a" not in c
    assert c.stats.hits == 0 and c.stats.misses == 0


def test_stats():
    c = LRUCache(1)
    c["a"] = 1
    c.get("a")
    c.get("zzz")
    c["b"] = 2
    assert (c.stats.hits, c.stats.misses, c.stats.evictions) == (1, 1, 1)
    assert c.stats.hit_rate == 0.5


def test_hit_rate_of_unused_cache():
    assert LRUCache().stats.hit_rate == 0.0


def test_on_evict_callback():
    evicted = []
    c = LRUCache(1, on_evict=lambda k, v: evicted.append((k, v)))
    c["a"] = 1
    c["b"] = 2
    del c["b"]
    assert evicted == [("a", 1)]


def test_pop_and_clear():
    c = LRUCache(3)
    c["a"] = 1
    assert c.pop("a") == 1
    assert c.pop("a", "gone") == "gone"
    with pytest.raises(KeyError):
        c.pop("a")
    c["b"] = 2
    c.clear()
    assert len(c) == 0


def test_resize_evicts():
    c = LRUCache(3)
    for k in "abc":
        c[k] = k
    c.resize(1)
    assert c.keys() == ["c"]
    assert c.stats.evictions == 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, None])
def test_invalid_maxsize(bad):
    with pytest.raises(ValueError):
        LRUCache(bad)


def test_iteration_order_is_lru_first():
    c = LRUCache(3)
    for k in "xyz":
        c[k] = k
    assert list(c) == ["x", "y", "z"]

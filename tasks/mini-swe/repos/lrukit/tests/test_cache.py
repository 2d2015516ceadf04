import pytest

from lrukit import LRUCache


def test_put_get():
    c = LRUCache(2)
    c.put("a", 1)
    assert c.get("a") == 1
    assert c.get("zz", 0) == 0


def test_evicts_oldest_insert():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    c.put("c", 3)
    assert "a" not in c and len(c) == 2
    assert c.evictions == 1


def test_put_refreshes():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    c.put("a", 10)
    c.put("c", 3)
    assert c.get("a") == 10 and "b" not in c


def test_capacity_validation():
    with pytest.raises(ValueError):
        LRUCache(0)

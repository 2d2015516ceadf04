from metrics import limits


def test_cache_ttl_is_positive():
    assert limits.CACHE_TTL > 0


def test_workers_is_positive():
    assert limits.WORKERS > 0


def test_timeout_is_positive():
    assert limits.TIMEOUT > 0


def test_port_is_positive():
    assert limits.PORT > 0

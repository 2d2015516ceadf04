from metrics import limits


def test_workers_is_positive():
    assert limits.WORKERS > 0


def test_cache_ttl_is_positive():
    assert limits.CACHE_TTL > 0


def test_retries_is_positive():
    assert limits.RETRIES > 0


def test_max_depth_is_positive():
    assert limits.MAX_DEPTH > 0

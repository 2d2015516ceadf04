from price_worker import tuning


def test_retry_size_is_positive():
    assert tuning.RETRY_SIZE > 0


def test_worker_depth_is_positive():
    assert tuning.WORKER_DEPTH > 0


def test_cache_ttl_is_positive():
    assert tuning.CACHE_TTL > 0


def test_worker_limit_is_positive():
    assert tuning.WORKER_LIMIT > 0

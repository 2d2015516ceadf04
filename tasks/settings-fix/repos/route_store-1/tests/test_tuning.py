from route_store import tuning


def test_max_size_is_positive():
    assert tuning.MAX_SIZE > 0


def test_queue_limit_is_positive():
    assert tuning.QUEUE_LIMIT > 0


def test_cache_size_is_positive():
    assert tuning.CACHE_SIZE > 0


def test_retry_delay_is_positive():
    assert tuning.RETRY_DELAY > 0

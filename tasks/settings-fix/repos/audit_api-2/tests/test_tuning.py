from audit_api import tuning


def test_cache_rate_is_positive():
    assert tuning.CACHE_RATE > 0


def test_default_ttl_is_positive():
    assert tuning.DEFAULT_TTL > 0


def test_min_delay_is_positive():
    assert tuning.MIN_DELAY > 0


def test_queue_depth_is_positive():
    assert tuning.QUEUE_DEPTH > 0

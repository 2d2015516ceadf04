from report_sync import tuning


def test_retry_ttl_is_positive():
    assert tuning.RETRY_TTL > 0


def test_cache_rate_is_positive():
    assert tuning.CACHE_RATE > 0


def test_retry_window_is_positive():
    assert tuning.RETRY_WINDOW > 0


def test_min_depth_is_positive():
    assert tuning.MIN_DEPTH > 0

from media_sync import params


def test_min_ttl_is_positive():
    assert params.MIN_TTL > 0


def test_stream_rate_is_positive():
    assert params.STREAM_RATE > 0


def test_pool_ttl_is_positive():
    assert params.POOL_TTL > 0


def test_cache_window_is_positive():
    assert params.CACHE_WINDOW > 0

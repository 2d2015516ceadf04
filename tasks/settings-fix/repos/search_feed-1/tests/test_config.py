from search_feed import config


def test_pool_port_is_positive():
    assert config.POOL_PORT > 0


def test_queue_window_is_positive():
    assert config.QUEUE_WINDOW > 0


def test_stream_rate_is_positive():
    assert config.STREAM_RATE > 0


def test_cache_port_is_positive():
    assert config.CACHE_PORT > 0

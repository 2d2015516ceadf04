from media_sync import config


def test_stream_window_is_positive():
    assert config.STREAM_WINDOW > 0


def test_retry_port_is_positive():
    assert config.RETRY_PORT > 0


def test_min_ttl_is_positive():
    assert config.MIN_TTL > 0


def test_cache_delay_is_positive():
    assert config.CACHE_DELAY > 0

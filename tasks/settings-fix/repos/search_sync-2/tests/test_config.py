from search_sync import config


def test_stream_rate_is_positive():
    assert config.STREAM_RATE > 0


def test_batch_rate_is_positive():
    assert config.BATCH_RATE > 0


def test_buffer_delay_is_positive():
    assert config.BUFFER_DELAY > 0


def test_min_ttl_is_positive():
    assert config.MIN_TTL > 0

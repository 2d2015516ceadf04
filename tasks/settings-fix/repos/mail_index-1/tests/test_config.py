from mail_index import config


def test_stream_limit_is_positive():
    assert config.STREAM_LIMIT > 0


def test_batch_count_is_positive():
    assert config.BATCH_COUNT > 0


def test_cache_port_is_positive():
    assert config.CACHE_PORT > 0


def test_stream_rate_is_positive():
    assert config.STREAM_RATE > 0

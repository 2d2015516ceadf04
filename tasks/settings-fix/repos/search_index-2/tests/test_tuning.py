from search_index import tuning


def test_stream_delay_is_positive():
    assert tuning.STREAM_DELAY > 0


def test_buffer_count_is_positive():
    assert tuning.BUFFER_COUNT > 0


def test_default_timeout_is_positive():
    assert tuning.DEFAULT_TIMEOUT > 0


def test_retry_ttl_is_positive():
    assert tuning.RETRY_TTL > 0

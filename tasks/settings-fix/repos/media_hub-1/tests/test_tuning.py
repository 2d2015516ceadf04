from media_hub import tuning


def test_retry_ttl_is_positive():
    assert tuning.RETRY_TTL > 0


def test_batch_ttl_is_positive():
    assert tuning.BATCH_TTL > 0


def test_buffer_count_is_positive():
    assert tuning.BUFFER_COUNT > 0


def test_max_port_is_positive():
    assert tuning.MAX_PORT > 0

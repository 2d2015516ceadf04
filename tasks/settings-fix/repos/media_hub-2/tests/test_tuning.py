from media_hub import tuning


def test_queue_ttl_is_positive():
    assert tuning.QUEUE_TTL > 0


def test_pool_size_is_positive():
    assert tuning.POOL_SIZE > 0


def test_pool_rate_is_positive():
    assert tuning.POOL_RATE > 0


def test_min_port_is_positive():
    assert tuning.MIN_PORT > 0

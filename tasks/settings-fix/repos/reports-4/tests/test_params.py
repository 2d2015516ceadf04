from reports import params


def test_port_is_positive():
    assert params.PORT > 0


def test_retries_is_positive():
    assert params.RETRIES > 0


def test_cache_ttl_is_positive():
    assert params.CACHE_TTL > 0


def test_batch_size_is_positive():
    assert params.BATCH_SIZE > 0

from billing import config


def test_retries_is_positive():
    assert config.RETRIES > 0


def test_port_is_positive():
    assert config.PORT > 0


def test_batch_size_is_positive():
    assert config.BATCH_SIZE > 0


def test_cache_ttl_is_positive():
    assert config.CACHE_TTL > 0

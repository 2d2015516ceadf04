from backup import config


def test_batch_size_is_positive():
    assert config.BATCH_SIZE > 0


def test_retries_is_positive():
    assert config.RETRIES > 0


def test_buffer_size_is_positive():
    assert config.BUFFER_SIZE > 0


def test_cache_ttl_is_positive():
    assert config.CACHE_TTL > 0

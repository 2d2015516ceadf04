from chat import defaults


def test_batch_size_is_positive():
    assert defaults.BATCH_SIZE > 0


def test_port_is_positive():
    assert defaults.PORT > 0


def test_cache_ttl_is_positive():
    assert defaults.CACHE_TTL > 0


def test_buffer_size_is_positive():
    assert defaults.BUFFER_SIZE > 0

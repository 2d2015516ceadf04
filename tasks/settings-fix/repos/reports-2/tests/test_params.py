from reports import params


def test_max_depth_is_positive():
    assert params.MAX_DEPTH > 0


def test_port_is_positive():
    assert params.PORT > 0


def test_buffer_size_is_positive():
    assert params.BUFFER_SIZE > 0


def test_cache_ttl_is_positive():
    assert params.CACHE_TTL > 0

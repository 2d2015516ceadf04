from mailer import limits


def test_max_depth_is_positive():
    assert limits.MAX_DEPTH > 0


def test_port_is_positive():
    assert limits.PORT > 0


def test_buffer_size_is_positive():
    assert limits.BUFFER_SIZE > 0


def test_cache_ttl_is_positive():
    assert limits.CACHE_TTL > 0

from auth import options


def test_cache_ttl_is_positive():
    assert options.CACHE_TTL > 0


def test_retries_is_positive():
    assert options.RETRIES > 0


def test_buffer_size_is_positive():
    assert options.BUFFER_SIZE > 0


def test_max_depth_is_positive():
    assert options.MAX_DEPTH > 0

from auth import options


def test_buffer_size_is_positive():
    assert options.BUFFER_SIZE > 0


def test_cache_ttl_is_positive():
    assert options.CACHE_TTL > 0


def test_max_depth_is_positive():
    assert options.MAX_DEPTH > 0


def test_batch_size_is_positive():
    assert options.BATCH_SIZE > 0

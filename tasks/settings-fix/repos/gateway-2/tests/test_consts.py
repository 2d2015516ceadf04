from gateway import consts


def test_buffer_size_is_positive():
    assert consts.BUFFER_SIZE > 0


def test_batch_size_is_positive():
    assert consts.BATCH_SIZE > 0


def test_max_users_is_positive():
    assert consts.MAX_USERS > 0


def test_cache_ttl_is_positive():
    assert consts.CACHE_TTL > 0

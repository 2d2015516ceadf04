from chat import defaults


def test_cache_ttl_is_positive():
    assert defaults.CACHE_TTL > 0


def test_batch_size_is_positive():
    assert defaults.BATCH_SIZE > 0


def test_timeout_is_positive():
    assert defaults.TIMEOUT > 0


def test_max_users_is_positive():
    assert defaults.MAX_USERS > 0

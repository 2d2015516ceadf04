from reports import params


def test_retries_is_positive():
    assert params.RETRIES > 0


def test_timeout_is_positive():
    assert params.TIMEOUT > 0


def test_cache_ttl_is_positive():
    assert params.CACHE_TTL > 0


def test_max_users_is_positive():
    assert params.MAX_USERS > 0

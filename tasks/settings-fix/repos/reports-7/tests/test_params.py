from reports import params


def test_port_is_positive():
    assert params.PORT > 0


def test_cache_ttl_is_positive():
    assert params.CACHE_TTL > 0


def test_workers_is_positive():
    assert params.WORKERS > 0


def test_max_users_is_positive():
    assert params.MAX_USERS > 0

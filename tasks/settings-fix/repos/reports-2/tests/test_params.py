from reports import params


def test_cache_ttl_is_positive():
    assert params.CACHE_TTL > 0


def test_port_is_positive():
    assert params.PORT > 0


def test_max_users_is_positive():
    assert params.MAX_USERS > 0


def test_page_size_is_positive():
    assert params.PAGE_SIZE > 0

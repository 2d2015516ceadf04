from gateway import consts


def test_page_size_is_positive():
    assert consts.PAGE_SIZE > 0


def test_cache_ttl_is_positive():
    assert consts.CACHE_TTL > 0


def test_workers_is_positive():
    assert consts.WORKERS > 0


def test_max_users_is_positive():
    assert consts.MAX_USERS > 0

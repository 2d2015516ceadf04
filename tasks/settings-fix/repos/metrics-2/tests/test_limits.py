from metrics import limits


def test_cache_ttl_is_positive():
    assert limits.CACHE_TTL > 0


def test_max_depth_is_positive():
    assert limits.MAX_DEPTH > 0


def test_max_users_is_positive():
    assert limits.MAX_USERS > 0


def test_page_size_is_positive():
    assert limits.PAGE_SIZE > 0

from search import limits


def test_workers_is_positive():
    assert limits.WORKERS > 0


def test_max_depth_is_positive():
    assert limits.MAX_DEPTH > 0


def test_max_users_is_positive():
    assert limits.MAX_USERS > 0


def test_cache_ttl_is_positive():
    assert limits.CACHE_TTL > 0

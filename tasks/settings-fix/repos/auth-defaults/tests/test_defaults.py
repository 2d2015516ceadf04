from auth import defaults


def test_timeout_is_positive():
    assert defaults.TIMEOUT > 0


def test_page_size_is_positive():
    assert defaults.PAGE_SIZE > 0


def test_cache_ttl_is_positive():
    assert defaults.CACHE_TTL > 0


def test_max_users_is_positive():
    assert defaults.MAX_USERS > 0

from inventory import settings


def test_cache_ttl_is_positive():
    assert settings.CACHE_TTL > 0


def test_max_depth_is_positive():
    assert settings.MAX_DEPTH > 0


def test_page_size_is_positive():
    assert settings.PAGE_SIZE > 0


def test_max_users_is_positive():
    assert settings.MAX_USERS > 0

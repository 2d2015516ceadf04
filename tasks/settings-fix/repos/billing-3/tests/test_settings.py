from billing import settings


def test_buffer_size_is_positive():
    assert settings.BUFFER_SIZE > 0


def test_max_users_is_positive():
    assert settings.MAX_USERS > 0


def test_cache_ttl_is_positive():
    assert settings.CACHE_TTL > 0


def test_max_depth_is_positive():
    assert settings.MAX_DEPTH > 0

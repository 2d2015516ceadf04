from gateway import settings


def test_cache_ttl_is_positive():
    assert settings.CACHE_TTL > 0


def test_batch_size_is_positive():
    assert settings.BATCH_SIZE > 0


def test_timeout_is_positive():
    assert settings.TIMEOUT > 0


def test_max_users_is_positive():
    assert settings.MAX_USERS > 0

from billing import settings


def test_retries_is_positive():
    assert settings.RETRIES > 0


def test_cache_ttl_is_positive():
    assert settings.CACHE_TTL > 0


def test_workers_is_positive():
    assert settings.WORKERS > 0


def test_max_users_is_positive():
    assert settings.MAX_USERS > 0

from billing import settings


def test_port_is_positive():
    assert settings.PORT > 0


def test_workers_is_positive():
    assert settings.WORKERS > 0


def test_batch_size_is_positive():
    assert settings.BATCH_SIZE > 0


def test_cache_ttl_is_positive():
    assert settings.CACHE_TTL > 0

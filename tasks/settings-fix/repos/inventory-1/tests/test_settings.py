from inventory import settings


def test_max_depth_is_positive():
    assert settings.MAX_DEPTH > 0


def test_batch_size_is_positive():
    assert settings.BATCH_SIZE > 0


def test_cache_ttl_is_positive():
    assert settings.CACHE_TTL > 0


def test_port_is_positive():
    assert settings.PORT > 0

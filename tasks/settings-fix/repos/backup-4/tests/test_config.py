from backup import config


def test_batch_size_is_positive():
    assert config.BATCH_SIZE > 0


def test_cache_ttl_is_positive():
    assert config.CACHE_TTL > 0


def test_port_is_positive():
    assert config.PORT > 0


def test_max_users_is_positive():
    assert config.MAX_USERS > 0

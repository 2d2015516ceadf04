from backup import config


def test_port_is_positive():
    assert config.PORT > 0


def test_workers_is_positive():
    assert config.WORKERS > 0


def test_retries_is_positive():
    assert config.RETRIES > 0


def test_max_users_is_positive():
    assert config.MAX_USERS > 0

from upload import config


def test_max_depth_is_positive():
    assert config.MAX_DEPTH > 0


def test_timeout_is_positive():
    assert config.TIMEOUT > 0


def test_max_users_is_positive():
    assert config.MAX_USERS > 0


def test_workers_is_positive():
    assert config.WORKERS > 0

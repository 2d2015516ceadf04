from backup import config


def test_retries_is_positive():
    assert config.RETRIES > 0


def test_port_is_positive():
    assert config.PORT > 0


def test_max_depth_is_positive():
    assert config.MAX_DEPTH > 0


def test_timeout_is_positive():
    assert config.TIMEOUT > 0

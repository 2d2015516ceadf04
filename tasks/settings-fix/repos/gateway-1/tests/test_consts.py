from gateway import consts


def test_max_users_is_positive():
    assert consts.MAX_USERS > 0


def test_port_is_positive():
    assert consts.PORT > 0


def test_timeout_is_positive():
    assert consts.TIMEOUT > 0


def test_retries_is_positive():
    assert consts.RETRIES > 0

from auth import options


def test_timeout_is_positive():
    assert options.TIMEOUT > 0


def test_port_is_positive():
    assert options.PORT > 0


def test_max_users_is_positive():
    assert options.MAX_USERS > 0


def test_retries_is_positive():
    assert options.RETRIES > 0

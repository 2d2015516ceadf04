from upload import defaults


def test_port_is_positive():
    assert defaults.PORT > 0


def test_timeout_is_positive():
    assert defaults.TIMEOUT > 0


def test_max_users_is_positive():
    assert defaults.MAX_USERS > 0


def test_retries_is_positive():
    assert defaults.RETRIES > 0

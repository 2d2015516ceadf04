from chat import defaults


def test_workers_is_positive():
    assert defaults.WORKERS > 0


def test_timeout_is_positive():
    assert defaults.TIMEOUT > 0


def test_port_is_positive():
    assert defaults.PORT > 0


def test_max_users_is_positive():
    assert defaults.MAX_USERS > 0

from upload import defaults


def test_max_depth_is_positive():
    assert defaults.MAX_DEPTH > 0


def test_timeout_is_positive():
    assert defaults.TIMEOUT > 0


def test_max_users_is_positive():
    assert defaults.MAX_USERS > 0


def test_workers_is_positive():
    assert defaults.WORKERS > 0

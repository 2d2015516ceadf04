from sync import tuning


def test_retries_is_positive():
    assert tuning.RETRIES > 0


def test_max_users_is_positive():
    assert tuning.MAX_USERS > 0


def test_timeout_is_positive():
    assert tuning.TIMEOUT > 0


def test_workers_is_positive():
    assert tuning.WORKERS > 0

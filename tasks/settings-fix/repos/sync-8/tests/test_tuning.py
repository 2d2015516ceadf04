from sync import tuning


def test_port_is_positive():
    assert tuning.PORT > 0


def test_batch_size_is_positive():
    assert tuning.BATCH_SIZE > 0


def test_timeout_is_positive():
    assert tuning.TIMEOUT > 0


def test_max_users_is_positive():
    assert tuning.MAX_USERS > 0

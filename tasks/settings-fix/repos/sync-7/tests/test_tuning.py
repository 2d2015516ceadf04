from sync import tuning


def test_port_is_positive():
    assert tuning.PORT > 0


def test_max_users_is_positive():
    assert tuning.MAX_USERS > 0


def test_buffer_size_is_positive():
    assert tuning.BUFFER_SIZE > 0


def test_workers_is_positive():
    assert tuning.WORKERS > 0

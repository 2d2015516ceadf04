from search import limits


def test_port_is_positive():
    assert limits.PORT > 0


def test_max_users_is_positive():
    assert limits.MAX_USERS > 0


def test_batch_size_is_positive():
    assert limits.BATCH_SIZE > 0


def test_buffer_size_is_positive():
    assert limits.BUFFER_SIZE > 0

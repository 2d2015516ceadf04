from search import limits


def test_timeout_is_positive():
    assert limits.TIMEOUT > 0


def test_max_users_is_positive():
    assert limits.MAX_USERS > 0


def test_buffer_size_is_positive():
    assert limits.BUFFER_SIZE > 0


def test_retries_is_positive():
    assert limits.RETRIES > 0

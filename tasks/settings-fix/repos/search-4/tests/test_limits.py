from search import limits


def test_retries_is_positive():
    assert limits.RETRIES > 0


def test_max_users_is_positive():
    assert limits.MAX_USERS > 0


def test_max_depth_is_positive():
    assert limits.MAX_DEPTH > 0


def test_batch_size_is_positive():
    assert limits.BATCH_SIZE > 0

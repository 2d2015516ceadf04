from metrics import limits


def test_max_users_is_positive():
    assert limits.MAX_USERS > 0


def test_batch_size_is_positive():
    assert limits.BATCH_SIZE > 0


def test_retries_is_positive():
    assert limits.RETRIES > 0


def test_workers_is_positive():
    assert limits.WORKERS > 0

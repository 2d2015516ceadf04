from auth import options


def test_page_size_is_positive():
    assert options.PAGE_SIZE > 0


def test_max_users_is_positive():
    assert options.MAX_USERS > 0


def test_batch_size_is_positive():
    assert options.BATCH_SIZE > 0


def test_timeout_is_positive():
    assert options.TIMEOUT > 0

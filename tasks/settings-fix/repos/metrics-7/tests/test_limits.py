from metrics import limits


def test_retries_is_positive():
    assert limits.RETRIES > 0


def test_page_size_is_positive():
    assert limits.PAGE_SIZE > 0


def test_timeout_is_positive():
    assert limits.TIMEOUT > 0


def test_batch_size_is_positive():
    assert limits.BATCH_SIZE > 0

from search import limits


def test_page_size_is_positive():
    assert limits.PAGE_SIZE > 0


def test_port_is_positive():
    assert limits.PORT > 0


def test_timeout_is_positive():
    assert limits.TIMEOUT > 0


def test_retries_is_positive():
    assert limits.RETRIES > 0

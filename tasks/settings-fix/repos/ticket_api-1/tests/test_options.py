from ticket_api import options


def test_retry_rate_is_positive():
    assert options.RETRY_RATE > 0


def test_page_timeout_is_positive():
    assert options.PAGE_TIMEOUT > 0


def test_pool_size_is_positive():
    assert options.POOL_SIZE > 0


def test_page_limit_is_positive():
    assert options.PAGE_LIMIT > 0

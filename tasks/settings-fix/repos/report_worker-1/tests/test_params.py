from report_worker import params


def test_page_count_is_positive():
    assert params.PAGE_COUNT > 0


def test_queue_window_is_positive():
    assert params.QUEUE_WINDOW > 0


def test_cache_delay_is_positive():
    assert params.CACHE_DELAY > 0


def test_pool_port_is_positive():
    assert params.POOL_PORT > 0

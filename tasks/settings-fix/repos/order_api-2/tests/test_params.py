from order_api import params


def test_buffer_count_is_positive():
    assert params.BUFFER_COUNT > 0


def test_max_window_is_positive():
    assert params.MAX_WINDOW > 0


def test_batch_limit_is_positive():
    assert params.BATCH_LIMIT > 0


def test_pool_delay_is_positive():
    assert params.POOL_DELAY > 0

from report_worker import params


def test_cache_port_is_positive():
    assert params.CACHE_PORT > 0


def test_batch_count_is_positive():
    assert params.BATCH_COUNT > 0


def test_pool_window_is_positive():
    assert params.POOL_WINDOW > 0


def test_batch_depth_is_positive():
    assert params.BATCH_DEPTH > 0

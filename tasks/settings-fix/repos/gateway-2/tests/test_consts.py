from gateway import consts


def test_max_depth_is_positive():
    assert consts.MAX_DEPTH > 0


def test_timeout_is_positive():
    assert consts.TIMEOUT > 0


def test_workers_is_positive():
    assert consts.WORKERS > 0


def test_batch_size_is_positive():
    assert consts.BATCH_SIZE > 0

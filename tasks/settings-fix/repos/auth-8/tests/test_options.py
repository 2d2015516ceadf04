from auth import options


def test_max_depth_is_positive():
    assert options.MAX_DEPTH > 0


def test_batch_size_is_positive():
    assert options.BATCH_SIZE > 0


def test_workers_is_positive():
    assert options.WORKERS > 0


def test_retries_is_positive():
    assert options.RETRIES > 0

from auth import options


def test_timeout_is_positive():
    assert options.TIMEOUT > 0


def test_max_depth_is_positive():
    assert options.MAX_DEPTH > 0


def test_batch_size_is_positive():
    assert options.BATCH_SIZE > 0


def test_retries_is_positive():
    assert options.RETRIES > 0

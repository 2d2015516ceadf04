from gateway import consts


def test_timeout_is_positive():
    assert consts.TIMEOUT > 0


def test_retries_is_positive():
    assert consts.RETRIES > 0


def test_buffer_size_is_positive():
    assert consts.BUFFER_SIZE > 0


def test_max_depth_is_positive():
    assert consts.MAX_DEPTH > 0

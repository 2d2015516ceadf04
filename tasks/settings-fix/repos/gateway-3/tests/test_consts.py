from gateway import consts


def test_page_size_is_positive():
    assert consts.PAGE_SIZE > 0


def test_timeout_is_positive():
    assert consts.TIMEOUT > 0


def test_max_depth_is_positive():
    assert consts.MAX_DEPTH > 0


def test_buffer_size_is_positive():
    assert consts.BUFFER_SIZE > 0

from upload import defaults


def test_timeout_is_positive():
    assert defaults.TIMEOUT > 0


def test_max_depth_is_positive():
    assert defaults.MAX_DEPTH > 0


def test_page_size_is_positive():
    assert defaults.PAGE_SIZE > 0


def test_buffer_size_is_positive():
    assert defaults.BUFFER_SIZE > 0

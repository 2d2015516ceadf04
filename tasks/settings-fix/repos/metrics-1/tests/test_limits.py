from metrics import limits


def test_workers_is_positive():
    assert limits.WORKERS > 0


def test_max_depth_is_positive():
    assert limits.MAX_DEPTH > 0


def test_page_size_is_positive():
    assert limits.PAGE_SIZE > 0


def test_buffer_size_is_positive():
    assert limits.BUFFER_SIZE > 0

from reports import params


def test_page_size_is_positive():
    assert params.PAGE_SIZE > 0


def test_max_depth_is_positive():
    assert params.MAX_DEPTH > 0


def test_timeout_is_positive():
    assert params.TIMEOUT > 0


def test_batch_size_is_positive():
    assert params.BATCH_SIZE > 0

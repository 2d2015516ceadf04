from upload import defaults


def test_buffer_size_is_positive():
    assert defaults.BUFFER_SIZE > 0


def test_retries_is_positive():
    assert defaults.RETRIES > 0


def test_max_depth_is_positive():
    assert defaults.MAX_DEPTH > 0


def test_batch_size_is_positive():
    assert defaults.BATCH_SIZE > 0

from reports import params


def test_retries_is_positive():
    assert params.RETRIES > 0


def test_buffer_size_is_positive():
    assert params.BUFFER_SIZE > 0


def test_timeout_is_positive():
    assert params.TIMEOUT > 0


def test_batch_size_is_positive():
    assert params.BATCH_SIZE > 0

from upload import defaults


def test_retries_is_positive():
    assert defaults.RETRIES > 0


def test_port_is_positive():
    assert defaults.PORT > 0


def test_timeout_is_positive():
    assert defaults.TIMEOUT > 0


def test_batch_size_is_positive():
    assert defaults.BATCH_SIZE > 0

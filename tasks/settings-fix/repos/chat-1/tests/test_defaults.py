from chat import defaults


def test_timeout_is_positive():
    assert defaults.TIMEOUT > 0


def test_retries_is_positive():
    assert defaults.RETRIES > 0


def test_batch_size_is_positive():
    assert defaults.BATCH_SIZE > 0


def test_workers_is_positive():
    assert defaults.WORKERS > 0

from order_api import params


def test_stream_size_is_positive():
    assert params.STREAM_SIZE > 0


def test_default_rate_is_positive():
    assert params.DEFAULT_RATE > 0


def test_queue_size_is_positive():
    assert params.QUEUE_SIZE > 0


def test_retry_timeout_is_positive():
    assert params.RETRY_TIMEOUT > 0

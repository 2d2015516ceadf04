from route_store import params


def test_queue_ttl_is_positive():
    assert params.QUEUE_TTL > 0


def test_stream_size_is_positive():
    assert params.STREAM_SIZE > 0


def test_max_window_is_positive():
    assert params.MAX_WINDOW > 0


def test_min_size_is_positive():
    assert params.MIN_SIZE > 0

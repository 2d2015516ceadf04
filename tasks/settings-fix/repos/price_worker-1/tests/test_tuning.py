from price_worker import tuning


def test_stream_count_is_positive():
    assert tuning.STREAM_COUNT > 0


def test_min_size_is_positive():
    assert tuning.MIN_SIZE > 0


def test_buffer_size_is_positive():
    assert tuning.BUFFER_SIZE > 0


def test_max_delay_is_positive():
    assert tuning.MAX_DELAY > 0

from sync import tuning


def test_max_depth_is_positive():
    assert tuning.MAX_DEPTH > 0


def test_buffer_size_is_positive():
    assert tuning.BUFFER_SIZE > 0


def test_port_is_positive():
    assert tuning.PORT > 0


def test_batch_size_is_positive():
    assert tuning.BATCH_SIZE > 0

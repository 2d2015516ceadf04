from mailer import config


def test_buffer_size_is_positive():
    assert config.BUFFER_SIZE > 0


def test_batch_size_is_positive():
    assert config.BATCH_SIZE > 0


def test_timeout_is_positive():
    assert config.TIMEOUT > 0


def test_max_depth_is_positive():
    assert config.MAX_DEPTH > 0

from ticket_gate import config


def test_max_timeout_is_positive():
    assert config.MAX_TIMEOUT > 0


def test_cache_port_is_positive():
    assert config.CACHE_PORT > 0


def test_batch_depth_is_positive():
    assert config.BATCH_DEPTH > 0


def test_buffer_delay_is_positive():
    assert config.BUFFER_DELAY > 0

from file_hub import config


def test_pool_port_is_positive():
    assert config.POOL_PORT > 0


def test_pool_ttl_is_positive():
    assert config.POOL_TTL > 0


def test_stream_window_is_positive():
    assert config.STREAM_WINDOW > 0


def test_batch_depth_is_positive():
    assert config.BATCH_DEPTH > 0

from ticket_gate import consts


def test_pool_port_is_positive():
    assert consts.POOL_PORT > 0


def test_batch_depth_is_positive():
    assert consts.BATCH_DEPTH > 0


def test_stream_rate_is_positive():
    assert consts.STREAM_RATE > 0


def test_stream_ttl_is_positive():
    assert consts.STREAM_TTL > 0

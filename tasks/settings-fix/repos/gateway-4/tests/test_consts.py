from gateway import consts


def test_max_depth_is_positive():
    assert consts.MAX_DEPTH > 0


def test_retries_is_positive():
    assert consts.RETRIES > 0


def test_workers_is_positive():
    assert consts.WORKERS > 0


def test_port_is_positive():
    assert consts.PORT > 0

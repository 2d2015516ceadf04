from reports import limits


def test_retries_is_positive():
    assert limits.RETRIES > 0


def test_port_is_positive():
    assert limits.PORT > 0


def test_max_depth_is_positive():
    assert limits.MAX_DEPTH > 0


def test_timeout_is_positive():
    assert limits.TIMEOUT > 0

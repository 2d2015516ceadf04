from upload_web import defaults

S = {k: getattr(defaults, k) for k in dir(defaults) if k.isupper()}


def test_send_size_is_positive():
    assert S["SEND_SIZE"] > 0


def test_send_timeout_is_positive():
    assert S["SEND_TIMEOUT"] > 0


def test_min_port_is_positive():
    assert S["MIN_PORT"] > 0


def test_lock_retries_is_positive():
    assert S["LOCK_RETRIES"] > 0

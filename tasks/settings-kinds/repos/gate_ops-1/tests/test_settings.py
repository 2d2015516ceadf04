from gate_ops import options

S = {k: getattr(options, k) for k in dir(options) if k.isupper()}


def test_pool_size_is_positive():
    assert S["POOL_SIZE"] > 0


def test_read_retries_is_positive():
    assert S["READ_RETRIES"] > 0


def test_read_timeout_is_positive():
    assert S["READ_TIMEOUT"] > 0


def test_lock_limit_is_positive():
    assert S["LOCK_LIMIT"] > 0

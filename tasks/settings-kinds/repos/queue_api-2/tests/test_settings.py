from queue_api import options

S = {k: getattr(options, k) for k in dir(options) if k.isupper()}


def test_send_workers_is_positive():
    assert S["SEND_WORKERS"] > 0


def test_send_depth_is_positive():
    assert S["SEND_DEPTH"] > 0


def test_pool_limit_is_positive():
    assert S["POOL_LIMIT"] > 0


def test_read_ttl_is_positive():
    assert S["READ_TTL"] > 0

from ledger_pad import params

S = {k: getattr(params, k) for k in dir(params) if k.isupper()}


def test_write_ttl_is_positive():
    assert S["WRITE_TTL"] > 0


def test_lock_timeout_is_positive():
    assert S["LOCK_TIMEOUT"] > 0


def test_base_limit_is_positive():
    assert S["BASE_LIMIT"] > 0


def test_max_port_is_positive():
    assert S["MAX_PORT"] > 0

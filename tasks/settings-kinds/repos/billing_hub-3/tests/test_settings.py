from billing_hub import limits

S = {k: getattr(limits, k) for k in dir(limits) if k.isupper()}


def test_default_ttl_is_positive():
    assert S["DEFAULT_TTL"] > 0


def test_max_limit_is_positive():
    assert S["MAX_LIMIT"] > 0


def test_lock_timeout_is_positive():
    assert S["LOCK_TIMEOUT"] > 0


def test_base_limit_is_positive():
    assert S["BASE_LIMIT"] > 0

from metric_net import limits

S = {k: getattr(limits, k) for k in dir(limits) if k.isupper()}


def test_default_size_is_positive():
    assert S["DEFAULT_SIZE"] > 0


def test_idle_size_is_positive():
    assert S["IDLE_SIZE"] > 0


def test_pool_size_is_positive():
    assert S["POOL_SIZE"] > 0


def test_min_retries_is_positive():
    assert S["MIN_RETRIES"] > 0

from route_worker import tuning


def test_min_limit_is_positive():
    assert tuning.MIN_LIMIT > 0


def test_default_count_is_positive():
    assert tuning.DEFAULT_COUNT > 0


def test_max_count_is_positive():
    assert tuning.MAX_COUNT > 0


def test_default_ttl_is_positive():
    assert tuning.DEFAULT_TTL > 0

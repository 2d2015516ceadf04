from user_feed import defaults


def test_batch_window_is_positive():
    assert defaults.BATCH_WINDOW > 0


def test_cache_port_is_positive():
    assert defaults.CACHE_PORT > 0


def test_min_ttl_is_positive():
    assert defaults.MIN_TTL > 0


def test_max_timeout_is_positive():
    assert defaults.MAX_TIMEOUT > 0

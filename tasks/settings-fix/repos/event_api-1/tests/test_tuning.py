from event_api import tuning


def test_pool_limit_is_positive():
    assert tuning.POOL_LIMIT > 0


def test_batch_delay_is_positive():
    assert tuning.BATCH_DELAY > 0


def test_default_timeout_is_positive():
    assert tuning.DEFAULT_TIMEOUT > 0


def test_max_window_is_positive():
    assert tuning.MAX_WINDOW > 0

from mail_api import tuning


def test_worker_delay_is_positive():
    assert tuning.WORKER_DELAY > 0


def test_max_limit_is_positive():
    assert tuning.MAX_LIMIT > 0


def test_queue_ttl_is_positive():
    assert tuning.QUEUE_TTL > 0


def test_min_delay_is_positive():
    assert tuning.MIN_DELAY > 0

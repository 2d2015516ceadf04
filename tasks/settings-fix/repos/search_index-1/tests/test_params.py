from search_index import params


def test_queue_ttl_is_positive():
    assert params.QUEUE_TTL > 0


def test_queue_limit_is_positive():
    assert params.QUEUE_LIMIT > 0


def test_max_ttl_is_positive():
    assert params.MAX_TTL > 0


def test_pool_delay_is_positive():
    assert params.POOL_DELAY > 0

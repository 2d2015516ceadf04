from auth_gate import params


def test_cache_limit_is_positive():
    assert params.CACHE_LIMIT > 0


def test_min_size_is_positive():
    assert params.MIN_SIZE > 0


def test_worker_depth_is_positive():
    assert params.WORKER_DEPTH > 0


def test_batch_size_is_positive():
    assert params.BATCH_SIZE > 0

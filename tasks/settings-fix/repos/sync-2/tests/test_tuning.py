from sync import tuning


def test_batch_size_is_positive():
    assert tuning.BATCH_SIZE > 0


def test_max_depth_is_positive():
    assert tuning.MAX_DEPTH > 0


def test_cache_ttl_is_positive():
    assert tuning.CACHE_TTL > 0


def test_workers_is_positive():
    assert tuning.WORKERS > 0

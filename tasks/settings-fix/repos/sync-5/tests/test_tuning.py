from sync import tuning


def test_max_users_is_positive():
    assert tuning.MAX_USERS > 0


def test_cache_ttl_is_positive():
    assert tuning.CACHE_TTL > 0


def test_retries_is_positive():
    assert tuning.RETRIES > 0


def test_batch_size_is_positive():
    assert tuning.BATCH_SIZE > 0

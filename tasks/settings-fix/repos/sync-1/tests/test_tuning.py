from sync import tuning


def test_cache_ttl_is_positive():
    assert tuning.CACHE_TTL > 0


def test_batch_size_is_positive():
    assert tuning.BATCH_SIZE > 0


def test_retries_is_positive():
    assert tuning.RETRIES > 0


def test_page_size_is_positive():
    assert tuning.PAGE_SIZE > 0

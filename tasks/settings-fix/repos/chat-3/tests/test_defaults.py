from chat import defaults


def test_cache_ttl_is_positive():
    assert defaults.CACHE_TTL > 0


def test_timeout_is_positive():
    assert defaults.TIMEOUT > 0


def test_workers_is_positive():
    assert defaults.WORKERS > 0


def test_page_size_is_positive():
    assert defaults.PAGE_SIZE > 0

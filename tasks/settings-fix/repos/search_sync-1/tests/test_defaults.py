from search_sync import defaults


def test_min_ttl_is_positive():
    assert defaults.MIN_TTL > 0


def test_page_count_is_positive():
    assert defaults.PAGE_COUNT > 0


def test_page_depth_is_positive():
    assert defaults.PAGE_DEPTH > 0


def test_pool_ttl_is_positive():
    assert defaults.POOL_TTL > 0

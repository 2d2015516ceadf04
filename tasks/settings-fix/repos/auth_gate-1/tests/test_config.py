from auth_gate import config


def test_cache_depth_is_positive():
    assert config.CACHE_DEPTH > 0


def test_cache_timeout_is_positive():
    assert config.CACHE_TIMEOUT > 0


def test_page_ttl_is_positive():
    assert config.PAGE_TTL > 0


def test_retry_count_is_positive():
    assert config.RETRY_COUNT > 0

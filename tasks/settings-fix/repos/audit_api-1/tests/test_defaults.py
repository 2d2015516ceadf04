from audit_api import defaults


def test_default_limit_is_positive():
    assert defaults.DEFAULT_LIMIT > 0


def test_pool_depth_is_positive():
    assert defaults.POOL_DEPTH > 0


def test_cache_depth_is_positive():
    assert defaults.CACHE_DEPTH > 0


def test_pool_size_is_positive():
    assert defaults.POOL_SIZE > 0

from route_worker import settings


def test_min_count_is_positive():
    assert settings.MIN_COUNT > 0


def test_pool_limit_is_positive():
    assert settings.POOL_LIMIT > 0


def test_buffer_depth_is_positive():
    assert settings.BUFFER_DEPTH > 0


def test_page_timeout_is_positive():
    assert settings.PAGE_TIMEOUT > 0

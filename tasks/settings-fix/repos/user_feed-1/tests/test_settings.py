from user_feed import settings


def test_batch_window_is_positive():
    assert settings.BATCH_WINDOW > 0


def test_page_depth_is_positive():
    assert settings.PAGE_DEPTH > 0


def test_cache_count_is_positive():
    assert settings.CACHE_COUNT > 0


def test_pool_port_is_positive():
    assert settings.POOL_PORT > 0

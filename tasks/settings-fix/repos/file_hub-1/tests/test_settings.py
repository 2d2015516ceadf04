from file_hub import settings


def test_stream_window_is_positive():
    assert settings.STREAM_WINDOW > 0


def test_cache_window_is_positive():
    assert settings.CACHE_WINDOW > 0


def test_pool_window_is_positive():
    assert settings.POOL_WINDOW > 0


def test_page_count_is_positive():
    assert settings.PAGE_COUNT > 0

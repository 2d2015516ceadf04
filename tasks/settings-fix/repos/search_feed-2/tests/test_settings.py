from search_feed import settings


def test_cache_count_is_positive():
    assert settings.CACHE_COUNT > 0


def test_cache_window_is_positive():
    assert settings.CACHE_WINDOW > 0


def test_stream_window_is_positive():
    assert settings.STREAM_WINDOW > 0


def test_stream_timeout_is_positive():
    assert settings.STREAM_TIMEOUT > 0

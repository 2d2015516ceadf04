from search import settings


def test_max_depth_is_positive():
    assert settings.MAX_DEPTH > 0


def test_page_size_is_positive():
    assert settings.PAGE_SIZE > 0


def test_buffer_size_is_positive():
    assert settings.BUFFER_SIZE > 0


def test_retries_is_positive():
    assert settings.RETRIES > 0

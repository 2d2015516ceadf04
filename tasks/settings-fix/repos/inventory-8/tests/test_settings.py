from inventory import settings


def test_page_size_is_positive():
    assert settings.PAGE_SIZE > 0


def test_retries_is_positive():
    assert settings.RETRIES > 0


def test_port_is_positive():
    assert settings.PORT > 0


def test_timeout_is_positive():
    assert settings.TIMEOUT > 0

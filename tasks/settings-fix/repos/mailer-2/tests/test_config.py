from mailer import config


def test_timeout_is_positive():
    assert config.TIMEOUT > 0


def test_page_size_is_positive():
    assert config.PAGE_SIZE > 0


def test_buffer_size_is_positive():
    assert config.BUFFER_SIZE > 0


def test_port_is_positive():
    assert config.PORT > 0

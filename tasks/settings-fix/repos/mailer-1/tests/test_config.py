from mailer import config


def test_buffer_size_is_positive():
    assert config.BUFFER_SIZE > 0


def test_page_size_is_positive():
    assert config.PAGE_SIZE > 0


def test_retries_is_positive():
    assert config.RETRIES > 0


def test_max_users_is_positive():
    assert config.MAX_USERS > 0

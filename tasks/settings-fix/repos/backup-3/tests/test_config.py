from backup import config


def test_max_depth_is_positive():
    assert config.MAX_DEPTH > 0


def test_page_size_is_positive():
    assert config.PAGE_SIZE > 0


def test_retries_is_positive():
    assert config.RETRIES > 0


def test_timeout_is_positive():
    assert config.TIMEOUT > 0

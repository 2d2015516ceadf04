from backup import config


def test_port_is_positive():
    assert config.PORT > 0


def test_buffer_size_is_positive():
    assert config.BUFFER_SIZE > 0


def test_page_size_is_positive():
    assert config.PAGE_SIZE > 0


def test_cache_ttl_is_positive():
    assert config.CACHE_TTL > 0

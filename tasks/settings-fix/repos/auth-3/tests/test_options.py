from auth import options


def test_page_size_is_positive():
    assert options.PAGE_SIZE > 0


def test_cache_ttl_is_positive():
    assert options.CACHE_TTL > 0


def test_batch_size_is_positive():
    assert options.BATCH_SIZE > 0


def test_port_is_positive():
    assert options.PORT > 0

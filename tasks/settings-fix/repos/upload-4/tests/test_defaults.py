from upload import defaults


def test_cache_ttl_is_positive():
    assert defaults.CACHE_TTL > 0


def test_port_is_positive():
    assert defaults.PORT > 0


def test_page_size_is_positive():
    assert defaults.PAGE_SIZE > 0


def test_max_depth_is_positive():
    assert defaults.MAX_DEPTH > 0

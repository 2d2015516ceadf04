from report_sync import config


def test_default_port_is_positive():
    assert config.DEFAULT_PORT > 0


def test_batch_ttl_is_positive():
    assert config.BATCH_TTL > 0


def test_page_port_is_positive():
    assert config.PAGE_PORT > 0


def test_pool_count_is_positive():
    assert config.POOL_COUNT > 0

from backup import config


def test_port_is_positive():
    assert config.PORT > 0


def test_batch_size_is_positive():
    assert config.BATCH_SIZE > 0


def test_workers_is_positive():
    assert config.WORKERS > 0


def test_page_size_is_positive():
    assert config.PAGE_SIZE > 0

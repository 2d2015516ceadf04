from mailer import config


def test_retries_is_positive():
    assert config.RETRIES > 0


def test_batch_size_is_positive():
    assert config.BATCH_SIZE > 0


def test_port_is_positive():
    assert config.PORT > 0


def test_workers_is_positive():
    assert config.WORKERS > 0

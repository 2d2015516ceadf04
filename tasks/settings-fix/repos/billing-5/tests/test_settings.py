from billing import settings


def test_port_is_positive():
    assert settings.PORT > 0


def test_workers_is_positive():
    assert settings.WORKERS > 0


def test_max_depth_is_positive():
    assert settings.MAX_DEPTH > 0


def test_retries_is_positive():
    assert settings.RETRIES > 0

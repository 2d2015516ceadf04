from billing import settings


def test_retries_is_positive():
    assert settings.RETRIES > 0


def test_workers_is_positive():
    assert settings.WORKERS > 0


def test_max_depth_is_positive():
    assert settings.MAX_DEPTH > 0


def test_timeout_is_positive():
    assert settings.TIMEOUT > 0

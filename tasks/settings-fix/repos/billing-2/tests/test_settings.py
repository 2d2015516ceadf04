from billing import settings


def test_batch_size_is_positive():
    assert settings.BATCH_SIZE > 0


def test_timeout_is_positive():
    assert settings.TIMEOUT > 0


def test_buffer_size_is_positive():
    assert settings.BUFFER_SIZE > 0


def test_retries_is_positive():
    assert settings.RETRIES > 0

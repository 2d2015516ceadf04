from inventory import settings


def test_workers_is_positive():
    assert settings.WORKERS > 0


def test_retries_is_positive():
    assert settings.RETRIES > 0


def test_buffer_size_is_positive():
    assert settings.BUFFER_SIZE > 0


def test_max_users_is_positive():
    assert settings.MAX_USERS > 0

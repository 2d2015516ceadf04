from inventory import settings


def test_timeout_is_positive():
    assert settings.TIMEOUT > 0


def test_max_users_is_positive():
    assert settings.MAX_USERS > 0


def test_max_depth_is_positive():
    assert settings.MAX_DEPTH > 0


def test_buffer_size_is_positive():
    assert settings.BUFFER_SIZE > 0

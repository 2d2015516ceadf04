from inventory import settings


def test_port_is_positive():
    assert settings.PORT > 0


def test_max_users_is_positive():
    assert settings.MAX_USERS > 0


def test_workers_is_positive():
    assert settings.WORKERS > 0


def test_page_size_is_positive():
    assert settings.PAGE_SIZE > 0

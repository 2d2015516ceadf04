from billing import settings


def test_buffer_size_is_positive():
    assert settings.BUFFER_SIZE > 0


def test_workers_is_positive():
    assert settings.WORKERS > 0


def test_port_is_positive():
    assert settings.PORT > 0


def test_max_depth_is_positive():
    assert settings.MAX_DEPTH > 0

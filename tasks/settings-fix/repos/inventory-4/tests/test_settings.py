from inventory import settings


def test_batch_size_is_positive():
    assert settings.BATCH_SIZE > 0


def test_page_size_is_positive():
    assert settings.PAGE_SIZE > 0


def test_max_depth_is_positive():
    assert settings.MAX_DEPTH > 0


def test_workers_is_positive():
    assert settings.WORKERS > 0

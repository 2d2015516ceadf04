from chat import defaults


def test_workers_is_positive():
    assert defaults.WORKERS > 0


def test_retries_is_positive():
    assert defaults.RETRIES > 0


def test_page_size_is_positive():
    assert defaults.PAGE_SIZE > 0


def test_buffer_size_is_positive():
    assert defaults.BUFFER_SIZE > 0

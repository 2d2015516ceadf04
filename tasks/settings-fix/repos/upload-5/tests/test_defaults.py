from upload import defaults


def test_page_size_is_positive():
    assert defaults.PAGE_SIZE > 0


def test_buffer_size_is_positive():
    assert defaults.BUFFER_SIZE > 0


def test_port_is_positive():
    assert defaults.PORT > 0


def test_retries_is_positive():
    assert defaults.RETRIES > 0

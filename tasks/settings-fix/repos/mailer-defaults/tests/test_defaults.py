from mailer import defaults


def test_retries_is_positive():
    assert defaults.RETRIES > 0


def test_timeout_is_positive():
    assert defaults.TIMEOUT > 0


def test_buffer_size_is_positive():
    assert defaults.BUFFER_SIZE > 0


def test_cache_ttl_is_positive():
    assert defaults.CACHE_TTL > 0

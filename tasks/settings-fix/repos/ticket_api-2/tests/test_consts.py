from ticket_api import consts


def test_max_size_is_positive():
    assert consts.MAX_SIZE > 0


def test_worker_timeout_is_positive():
    assert consts.WORKER_TIMEOUT > 0


def test_min_limit_is_positive():
    assert consts.MIN_LIMIT > 0


def test_buffer_limit_is_positive():
    assert consts.BUFFER_LIMIT > 0

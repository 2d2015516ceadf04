from chat import defaults


def test_page_size_is_positive():
    assert defaults.PAGE_SIZE > 0


def test_max_users_is_positive():
    assert defaults.MAX_USERS > 0


def test_port_is_positive():
    assert defaults.PORT > 0


def test_batch_size_is_positive():
    assert defaults.BATCH_SIZE > 0

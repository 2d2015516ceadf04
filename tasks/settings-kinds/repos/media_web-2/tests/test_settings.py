from media_web import config

S = {k: getattr(config, k) for k in dir(config) if k.isupper()}


def test_read_workers_is_positive():
    assert S["READ_WORKERS"] > 0


def test_default_limit_is_positive():
    assert S["DEFAULT_LIMIT"] > 0


def test_max_size_is_positive():
    assert S["MAX_SIZE"] > 0


def test_conn_size_is_positive():
    assert S["CONN_SIZE"] > 0

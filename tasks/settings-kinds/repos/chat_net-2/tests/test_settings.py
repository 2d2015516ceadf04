from chat_net import defaults

S = {k: getattr(defaults, k) for k in dir(defaults) if k.isupper()}


def test_write_workers_is_positive():
    assert S["WRITE_WORKERS"] > 0


def test_read_retries_is_positive():
    assert S["READ_RETRIES"] > 0


def test_recv_port_is_positive():
    assert S["RECV_PORT"] > 0


def test_pool_size_is_positive():
    assert S["POOL_SIZE"] > 0

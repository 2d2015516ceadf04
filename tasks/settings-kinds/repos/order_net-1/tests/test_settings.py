import pathlib
import tomllib

S = tomllib.loads((pathlib.Path(__file__).resolve().parents[1] / 'order_net/defaults.toml').read_text())['order_net']


def test_idle_retries_is_positive():
    assert S["idle_retries"] > 0


def test_pool_port_is_positive():
    assert S["pool_port"] > 0


def test_recv_ttl_is_positive():
    assert S["recv_ttl"] > 0


def test_lock_size_is_positive():
    assert S["lock_size"] > 0

import pathlib
import tomllib

S = tomllib.loads((pathlib.Path(__file__).resolve().parents[1] / 'order_core/defaults.toml').read_text())['order_core']


def test_recv_port_is_positive():
    assert S["recv_port"] > 0


def test_read_workers_is_positive():
    assert S["read_workers"] > 0


def test_write_limit_is_positive():
    assert S["write_limit"] > 0


def test_idle_port_is_positive():
    assert S["idle_port"] > 0

import pathlib
import tomllib

S = tomllib.loads((pathlib.Path(__file__).resolve().parents[1] / 'order_run/defaults.toml').read_text())['order_run']


def test_conn_timeout_is_positive():
    assert S["conn_timeout"] > 0


def test_write_retries_is_positive():
    assert S["write_retries"] > 0


def test_max_port_is_positive():
    assert S["max_port"] > 0


def test_max_depth_is_positive():
    assert S["max_depth"] > 0

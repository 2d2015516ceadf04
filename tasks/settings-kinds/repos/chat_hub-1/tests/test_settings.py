import pathlib
import tomllib

S = tomllib.loads((pathlib.Path(__file__).resolve().parents[1] / 'chat_hub/defaults.toml').read_text())['chat_hub']


def test_default_workers_is_positive():
    assert S["default_workers"] > 0


def test_min_size_is_positive():
    assert S["min_size"] > 0


def test_recv_timeout_is_positive():
    assert S["recv_timeout"] > 0


def test_conn_port_is_positive():
    assert S["conn_port"] > 0

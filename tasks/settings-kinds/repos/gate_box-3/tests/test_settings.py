import pathlib
import tomllib

S = tomllib.loads((pathlib.Path(__file__).resolve().parents[1] / 'gate_box/options.toml').read_text())['gate_box']


def test_conn_retries_is_positive():
    assert S["conn_retries"] > 0


def test_recv_depth_is_positive():
    assert S["recv_depth"] > 0


def test_max_depth_is_positive():
    assert S["max_depth"] > 0


def test_default_ttl_is_positive():
    assert S["default_ttl"] > 0

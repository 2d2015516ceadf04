import configparser
import pathlib

_C = configparser.ConfigParser()
_C.read_string((pathlib.Path(__file__).resolve().parents[1] / 'order_net/defaults.ini').read_text())
S = {k: int(v) if v.isdigit() else v for k, v in _C['order_net'].items()}


def test_recv_port_is_positive():
    assert S["recv_port"] > 0


def test_min_timeout_is_positive():
    assert S["min_timeout"] > 0


def test_idle_size_is_positive():
    assert S["idle_size"] > 0


def test_max_size_is_positive():
    assert S["max_size"] > 0

import configparser
import pathlib

_C = configparser.ConfigParser()
_C.read_string((pathlib.Path(__file__).resolve().parents[1] / 'media_web/config.ini').read_text())
S = {k: int(v) if v.isdigit() else v for k, v in _C['media_web'].items()}


def test_pool_port_is_positive():
    assert S["pool_port"] > 0


def test_recv_workers_is_positive():
    assert S["recv_workers"] > 0


def test_pool_workers_is_positive():
    assert S["pool_workers"] > 0


def test_write_port_is_positive():
    assert S["write_port"] > 0

import configparser
import pathlib

_C = configparser.ConfigParser()
_C.read_string((pathlib.Path(__file__).resolve().parents[1] / 'queue_api/options.ini').read_text())
S = {k: int(v) if v.isdigit() else v for k, v in _C['queue_api'].items()}


def test_write_timeout_is_positive():
    assert S["write_timeout"] > 0


def test_recv_workers_is_positive():
    assert S["recv_workers"] > 0


def test_min_timeout_is_positive():
    assert S["min_timeout"] > 0


def test_send_ttl_is_positive():
    assert S["send_ttl"] > 0

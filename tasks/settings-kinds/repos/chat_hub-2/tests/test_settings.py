import configparser
import pathlib

_C = configparser.ConfigParser()
_C.read_string((pathlib.Path(__file__).resolve().parents[1] / 'chat_hub/defaults.ini').read_text())
S = {k: int(v) if v.isdigit() else v for k, v in _C['chat_hub'].items()}


def test_min_limit_is_positive():
    assert S["min_limit"] > 0


def test_conn_limit_is_positive():
    assert S["conn_limit"] > 0


def test_lock_workers_is_positive():
    assert S["lock_workers"] > 0


def test_lock_ttl_is_positive():
    assert S["lock_ttl"] > 0

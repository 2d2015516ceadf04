import configparser
import pathlib

_C = configparser.ConfigParser()
_C.read_string((pathlib.Path(__file__).resolve().parents[1] / 'ledger_ops/params.ini').read_text())
S = {k: int(v) if v.isdigit() else v for k, v in _C['ledger_ops'].items()}


def test_base_ttl_is_positive():
    assert S["base_ttl"] > 0


def test_pool_timeout_is_positive():
    assert S["pool_timeout"] > 0


def test_read_ttl_is_positive():
    assert S["read_ttl"] > 0


def test_conn_port_is_positive():
    assert S["conn_port"] > 0

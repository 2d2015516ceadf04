import configparser
import pathlib

_C = configparser.ConfigParser()
_C.read_string((pathlib.Path(__file__).resolve().parents[1] / 'ledger_api/params.ini').read_text())
S = {k: int(v) if v.isdigit() else v for k, v in _C['ledger_api'].items()}


def test_write_retries_is_positive():
    assert S["write_retries"] > 0


def test_conn_workers_is_positive():
    assert S["conn_workers"] > 0


def test_lock_timeout_is_positive():
    assert S["lock_timeout"] > 0


def test_max_depth_is_positive():
    assert S["max_depth"] > 0

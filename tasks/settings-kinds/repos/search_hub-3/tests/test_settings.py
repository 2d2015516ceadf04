import configparser
import pathlib

_C = configparser.ConfigParser()
_C.read_string((pathlib.Path(__file__).resolve().parents[1] / 'search_hub/settings.ini').read_text())
S = {k: int(v) if v.isdigit() else v for k, v in _C['search_hub'].items()}


def test_recv_size_is_positive():
    assert S["recv_size"] > 0


def test_conn_retries_is_positive():
    assert S["conn_retries"] > 0


def test_conn_workers_is_positive():
    assert S["conn_workers"] > 0


def test_base_limit_is_positive():
    assert S["base_limit"] > 0

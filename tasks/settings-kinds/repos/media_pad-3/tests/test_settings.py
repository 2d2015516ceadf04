import json
import pathlib

S = json.loads((pathlib.Path(__file__).resolve().parents[1] / 'media_pad/config.json').read_text())


def test_write_retries_is_positive():
    assert S["write_retries"] > 0


def test_write_ttl_is_positive():
    assert S["write_ttl"] > 0


def test_conn_timeout_is_positive():
    assert S["conn_timeout"] > 0


def test_default_port_is_positive():
    assert S["default_port"] > 0

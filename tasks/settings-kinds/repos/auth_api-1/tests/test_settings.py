import json
import pathlib

S = json.loads((pathlib.Path(__file__).resolve().parents[1] / 'auth_api/settings.json').read_text())


def test_send_size_is_positive():
    assert S["send_size"] > 0


def test_read_ttl_is_positive():
    assert S["read_ttl"] > 0


def test_write_timeout_is_positive():
    assert S["write_timeout"] > 0


def test_read_workers_is_positive():
    assert S["read_workers"] > 0

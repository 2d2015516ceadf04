import json
import pathlib

S = json.loads((pathlib.Path(__file__).resolve().parents[1] / 'gate_ops/options.json').read_text())


def test_read_size_is_positive():
    assert S["read_size"] > 0


def test_pool_ttl_is_positive():
    assert S["pool_ttl"] > 0


def test_write_port_is_positive():
    assert S["write_port"] > 0


def test_send_timeout_is_positive():
    assert S["send_timeout"] > 0

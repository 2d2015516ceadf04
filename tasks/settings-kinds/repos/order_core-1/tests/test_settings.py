import json
import pathlib

S = json.loads((pathlib.Path(__file__).resolve().parents[1] / 'order_core/defaults.json').read_text())


def test_base_retries_is_positive():
    assert S["base_retries"] > 0


def test_idle_port_is_positive():
    assert S["idle_port"] > 0


def test_idle_limit_is_positive():
    assert S["idle_limit"] > 0


def test_lock_size_is_positive():
    assert S["lock_size"] > 0

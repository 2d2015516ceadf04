import json
import pathlib

S = json.loads((pathlib.Path(__file__).resolve().parents[1] / 'chat_desk/defaults.json').read_text())


def test_write_ttl_is_positive():
    assert S["write_ttl"] > 0


def test_recv_depth_is_positive():
    assert S["recv_depth"] > 0


def test_write_retries_is_positive():
    assert S["write_retries"] > 0


def test_max_workers_is_positive():
    assert S["max_workers"] > 0

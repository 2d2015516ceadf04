import json
import pathlib

S = json.loads((pathlib.Path(__file__).resolve().parents[1] / 'metric_net/limits.json').read_text())


def test_read_port_is_positive():
    assert S["read_port"] > 0


def test_pool_depth_is_positive():
    assert S["pool_depth"] > 0


def test_base_timeout_is_positive():
    assert S["base_timeout"] > 0


def test_recv_workers_is_positive():
    assert S["recv_workers"] > 0

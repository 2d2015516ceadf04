import json
import pathlib

S = json.loads((pathlib.Path(__file__).resolve().parents[1] / 'upload_web/defaults.json').read_text())


def test_pool_timeout_is_positive():
    assert S["pool_timeout"] > 0


def test_default_retries_is_positive():
    assert S["default_retries"] > 0


def test_min_depth_is_positive():
    assert S["min_depth"] > 0


def test_base_retries_is_positive():
    assert S["base_retries"] > 0

import json
import pathlib

S = json.loads((pathlib.Path(__file__).resolve().parents[1] / 'ledger_hub/params.json').read_text())


def test_lock_depth_is_positive():
    assert S["lock_depth"] > 0


def test_idle_workers_is_positive():
    assert S["idle_workers"] > 0


def test_pool_retries_is_positive():
    assert S["pool_retries"] > 0


def test_pool_limit_is_positive():
    assert S["pool_limit"] > 0

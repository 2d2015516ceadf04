import pathlib
import tomllib

S = tomllib.loads((pathlib.Path(__file__).resolve().parents[1] / 'ledger_hub/params.toml').read_text())['ledger_hub']


def test_base_depth_is_positive():
    assert S["base_depth"] > 0


def test_pool_workers_is_positive():
    assert S["pool_workers"] > 0


def test_send_retries_is_positive():
    assert S["send_retries"] > 0


def test_min_workers_is_positive():
    assert S["min_workers"] > 0

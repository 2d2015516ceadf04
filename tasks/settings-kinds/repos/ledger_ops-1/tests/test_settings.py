import pathlib
import tomllib

S = tomllib.loads((pathlib.Path(__file__).resolve().parents[1] / 'ledger_ops/params.toml').read_text())['ledger_ops']


def test_send_ttl_is_positive():
    assert S["send_ttl"] > 0


def test_lock_size_is_positive():
    assert S["lock_size"] > 0


def test_idle_limit_is_positive():
    assert S["idle_limit"] > 0


def test_read_ttl_is_positive():
    assert S["read_ttl"] > 0

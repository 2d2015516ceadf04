import configparser
import pathlib

_C = configparser.ConfigParser()
_C.read_string((pathlib.Path(__file__).resolve().parents[1] / 'chat_net/defaults.ini').read_text())
S = {k: int(v) if v.isdigit() else v for k, v in _C['chat_net'].items()}


def test_base_depth_is_positive():
    assert S["base_depth"] > 0


def test_max_ttl_is_positive():
    assert S["max_ttl"] > 0


def test_lock_depth_is_positive():
    assert S["lock_depth"] > 0


def test_pool_workers_is_positive():
    assert S["pool_workers"] > 0

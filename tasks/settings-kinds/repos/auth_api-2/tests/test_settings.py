import pathlib
import tomllib

S = tomllib.loads((pathlib.Path(__file__).resolve().parents[1] / 'auth_api/settings.toml').read_text())['auth_api']


def test_base_timeout_is_positive():
    assert S["base_timeout"] > 0


def test_default_size_is_positive():
    assert S["default_size"] > 0


def test_min_depth_is_positive():
    assert S["min_depth"] > 0


def test_default_limit_is_positive():
    assert S["default_limit"] > 0

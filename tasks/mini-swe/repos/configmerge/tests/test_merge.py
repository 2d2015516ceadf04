from configmerge import Defaults, deep_merge, get_path


def test_flat_override():
    assert deep_merge({"a": 1, "b": 2}, {"b": 3}) == {"a": 1, "b": 3}


def test_nested_merge():
    merged = deep_merge({"db": {"host": "x", "port": 1}}, {"db": {"port": 2}})
    assert merged == {"db": {"host": "x", "port": 2}}


def test_replace_non_dict():
    assert deep_merge({"a": {"b": 1}}, {"a": 5}) == {"a": 5}


def test_get_path():
    cfg = Defaults().profile({})
    assert get_path(cfg, "db.port") == 5432
    assert get_path(cfg, "db.nope", "d") == "d"

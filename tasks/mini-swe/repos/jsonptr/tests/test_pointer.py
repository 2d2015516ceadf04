import pytest

from jsonptr import PointerError, join, resolve, split

DOC = {"foo": ["bar", "baz"], "": 0, "a/b": 1, "m~n": 8, "k": {"x": [1, {"y": 2}]}}


def test_rfc_examples():
    assert resolve(DOC, "") == DOC
    assert resolve(DOC, "/foo/0") == "bar"
    assert resolve(DOC, "/") == 0
    assert resolve(DOC, "/a~1b") == 1
    assert resolve(DOC, "/m~0n") == 8


def test_nested():
    assert resolve(DOC, "/k/x/1/y") == 2


def test_errors():
    with pytest.raises(PointerError):
        resolve(DOC, "/foo/9")
    with pytest.raises(PointerError):
        resolve(DOC, "foo")


def test_split_join():
    assert split(join(["a/b", "c"])) == ["a/b", "c"]

import pytest

from iniconf import Config, ParseError, parse


def test_basic():
    assert parse("[a]\nx = 1\ny=two\n") == {"a": {"x": "1", "y": "two"}}


def test_full_line_comments():
    assert parse("# top\n[a]\n; note\nx = 1\n") == {"a": {"x": "1"}}


def test_trailing_comment_after_space():
    assert parse("[a]\nx = 1  # one\n") == {"a": {"x": "1"}}


def test_key_outside_section():
    with pytest.raises(ParseError):
        parse("x = 1\n")


def test_typed_getters():
    c = Config("[s]\nport = 8080\ndebug = yes\n")
    assert c.getint("s", "port") == 8080
    assert c.getbool("s", "debug") is True
    assert c.get("s", "nope", "d") == "d"

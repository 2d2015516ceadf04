import pytest

from tmplfilters import TemplateError, render


def test_plain_variable():
    assert render("Hi {{ name }}!", {"name": "Ann"}) == "Hi Ann!"


def test_dotted():
    assert render("{{ user.city }}", {"user": {"city": "Oslo"}}) == "Oslo"


def test_single_filter():
    assert render("{{ x|upper }}", {"x": "abc"}) == "ABC"


def test_undefined():
    with pytest.raises(TemplateError):
        render("{{ nope }}", {})


def test_unknown_filter():
    with pytest.raises(TemplateError):
        render("{{ x|shout }}", {"x": "a"})

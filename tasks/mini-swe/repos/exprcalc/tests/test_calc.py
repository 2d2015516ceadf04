import pytest

from exprcalc import evaluate, tokenize


def test_precedence():
    assert evaluate("1 + 2 * 3") == 7
    assert evaluate("(1 + 2) * 3") == 9


def test_addition_chain():
    assert evaluate("1 + 2 + 3 + 4") == 10


def test_unary_minus():
    assert evaluate("-3 * 2") == -6
    assert evaluate("2 * -3") == -6


def test_power_right_assoc():
    assert evaluate("2 ^ 3 ^ 2") == 512


def test_bad_input():
    with pytest.raises(SyntaxError):
        evaluate("1 + $")
    with pytest.raises(SyntaxError):
        evaluate("(1 + 2")


def test_tokenize():
    kinds = [t.kind for t in tokenize("(1.5+2)")]
    assert kinds == ["lparen", "num", "op", "num", "rparen", "end"]

import pytest

from lexkit import LexError, TokenType, tokenize


def test_words_and_numbers():
    toks = tokenize("x = 42;")
    assert [(t.type, t.value) for t in toks] == [
        (TokenType.WORD, "x"),
        (TokenType.SYMBOL, "="),
        (TokenType.NUMBER, "42"),
        (TokenType.SYMBOL, ";"),
    ]


def test_simple_string():
    (tok,) = tokenize('"hello world"')
    assert tok.type is TokenType.STRING and tok.value == "hello world"


def test_newline_escape():
    (tok,) = tokenize(r'"a\nb"')
    assert tok.value == "a\nb"


def test_unterminated():
    with pytest.raises(LexError):
        tokenize('"abc')

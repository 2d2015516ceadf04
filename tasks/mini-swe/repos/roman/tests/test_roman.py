import pytest

from roman import from_roman, is_valid, to_roman


def test_to_roman():
    assert to_roman(1994) == "MCMXCIV"
    assert to_roman(3999) == "MMMCMXCIX"


def test_simple_from_roman():
    assert from_roman("III") == 3
    assert from_roman("LVIII") == 58
    assert from_roman("iv") == 4


def test_leading_subtractive():
    assert from_roman("IX") == 9
    assert from_roman("CD") == 400


def test_invalid():
    for bad in ["IIII", "VX", "", "ABC"]:
        with pytest.raises(ValueError):
            from_roman(bad)
    assert not is_valid("MMMM")


def test_range():
    with pytest.raises(ValueError):
        to_roman(0)

import pytest

from ledger import Ledger, Money


def test_add_and_subtract():
    assert Money("1.10") + Money("2.20") == Money("3.30")
    assert Money("5") - Money("0.01") == Money("4.99")


def test_currency_mismatch():
    with pytest.raises(ValueError):
        Money("1", "EUR") + Money("1", "USD")


def test_even_split():
    assert Money("9.00").split(3) == [Money("3.00")] * 3


def test_ledger_balance():
    book = Ledger()
    book.post("coffee", "-3.50")
    book.post("salary", "100")
    assert book.balance() == Money("96.50")


def test_multiply():
    assert Money("10.00") * 3 == Money("30.00")

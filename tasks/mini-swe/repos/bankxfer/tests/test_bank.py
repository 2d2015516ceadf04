import pytest

from bankxfer import AccountFrozen, Bank, InsufficientFunds


def make():
    bank = Bank()
    bank.open("alice", 100)
    bank.open("bob", 10)
    return bank


def test_transfer():
    bank = make()
    bank.transfer("alice", "bob", 30)
    assert bank.accounts["alice"].balance == 70
    assert bank.accounts["bob"].balance == 40
    assert len(bank.journal) == 1


def test_insufficient_funds_changes_nothing():
    bank = make()
    with pytest.raises(InsufficientFunds):
        bank.transfer("bob", "alice", 50)
    assert bank.total() == 110 and len(bank.journal) == 0


def test_frozen_source():
    bank = make()
    bank.accounts["alice"].frozen = True
    with pytest.raises(AccountFrozen):
        bank.transfer("alice", "bob", 1)


def test_positive_amount():
    with pytest.raises(ValueError):
        make().transfer("alice", "bob", 0)

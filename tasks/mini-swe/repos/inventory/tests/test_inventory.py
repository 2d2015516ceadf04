import pytest

from inventory import InsufficientStock, Inventory, UnknownReservation


def test_reserve_reduces_available():
    inv = Inventory()
    inv.receive("A", 5)
    inv.reserve("A", 3)
    assert inv.available("A") == 2


def test_insufficient():
    inv = Inventory()
    inv.receive("A", 1)
    with pytest.raises(InsufficientStock):
        inv.reserve("A", 2)


def test_commit_ships():
    inv = Inventory()
    inv.receive("A", 5)
    rid = inv.reserve("A", 2)
    inv.commit(rid)
    assert inv.on_hand["A"] == 3
    assert inv.available("A") == 3


def test_unknown():
    with pytest.raises(UnknownReservation):
        Inventory().cancel(42)

import itertools

from inventory.errors import InsufficientStock, UnknownReservation
from inventory.reservation import Reservation


class Inventory:
    def __init__(self):
        self.on_hand = {}
        self.reserved = {}
        self.reservations = {}
        self._ids = itertools.count(1)

    def receive(self, sku, qty):
        self.on_hand[sku] = self.on_hand.get(sku, 0) + qty

    def available(self, sku):
        return self.on_hand.get(sku, 0) - self.reserved.get(sku, 0)

    def reserve(self, sku, qty):
        if qty > self.available(sku):
            raise InsufficientStock(f"{sku}: want {qty}, have {self.available(sku)}")
        r = Reservation(next(self._ids), sku, qty)
        self.reservations[r.id] = r
        self.reserved[sku] = self.reserved.get(sku, 0) + qty
        return r.id

    def _get(self, rid):
        try:
            return self.reservations[rid]
        except KeyError:
            raise UnknownReservation(rid) from None

    def cancel(self, rid):
        r = self._get(rid)
        self.on_hand[r.sku] += r.qty
        r.state = "cancelled"

    def commit(self, rid):
        r = self._get(rid)
        if r.state != "open":
            raise ValueError(f"reservation {rid} is {r.state}")
        self.reserved[r.sku] -= r.qty
        self.on_hand[r.sku] -= r.qty
        r.state = "committed"

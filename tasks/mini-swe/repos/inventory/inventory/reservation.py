from dataclasses import dataclass


@dataclass
class Reservation:
    id: int
    sku: str
    qty: int
    state: str = "open"  # open, committed, cancelled

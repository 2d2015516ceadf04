from inventory.errors import InsufficientStock, UnknownReservation
from inventory.store import Inventory

__all__ = ["InsufficientStock", "Inventory", "UnknownReservation"]

from ledger.money import Money
from ledger.rounding import quantize_cents
from ledger.book import Ledger

__all__ = ["Ledger", "Money", "quantize_cents"]

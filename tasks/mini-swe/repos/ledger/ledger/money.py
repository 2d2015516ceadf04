from decimal import Decimal

from ledger.rounding import CENT, quantize_cents


class Money:
    __slots__ = ("amount", "currency")

    def __init__(self, amount, currency="EUR"):
        self.amount = quantize_cents(amount)
        self.currency = currency

    def _check(self, other):
        if not isinstance(other, Money) or other.currency != self.currency:
            raise ValueError("currency mismatch")

    def __add__(self, other):
        self._check(other)
        return Money(self.amount + other.amount, self.currency)

    def __sub__(self, other):
        self._check(other)
        return Money(self.amount - other.amount, self.currency)

    def __mul__(self, factor):
        return Money(self.amount * Decimal(str(factor)), self.currency)

    def __eq__(self, other):
        return isinstance(other, Money) and (self.amount, self.currency) == (
            other.amount,
            other.currency,
        )

    def __repr__(self):
        return f"Money('{self.amount}', '{self.currency}')"

    def split(self, parts):
        if parts < 1:
            raise ValueError("parts must be positive")
        share = (self.amount / parts).quantize(CENT)
        share = quantize_cents(self.amount / parts)
        return [Money(share, self.currency) for _ in range(parts)]

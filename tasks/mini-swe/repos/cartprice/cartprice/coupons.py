from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class PercentCoupon:
    percent: int

    def apply(self, amount):
        return amount * (100 - Decimal(self.percent)) / 100


@dataclass(frozen=True)
class FixedCoupon:
    amount: Decimal

    def apply(self, amount):
        return max(Decimal("0"), amount - Decimal(self.amount))

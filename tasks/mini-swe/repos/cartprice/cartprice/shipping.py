from decimal import Decimal

FREE_ABOVE = Decimal("50.00")
FLAT = Decimal("4.90")


def shipping_for(amount):
    return Decimal("0") if amount >= FREE_ABOVE else FLAT

from decimal import ROUND_HALF_EVEN, Decimal

CENT = Decimal("0.01")


def quantize_cents(value):
    """Round a Decimal (or a string/int) to whole cents."""
    return Decimal(str(value)).quantize(CENT, rounding=ROUND_HALF_EVEN)

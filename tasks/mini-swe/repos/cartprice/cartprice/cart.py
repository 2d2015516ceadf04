from decimal import ROUND_HALF_UP, Decimal

from cartprice.shipping import shipping_for

CENT = Decimal("0.01")


class Cart:
    def __init__(self):
        self.lines = []
        self.coupons = []

    def add(self, name, unit_price, qty=1):
        self.lines.append((name, Decimal(str(unit_price)), qty))

    def apply(self, coupon):
        self.coupons.append(coupon)

    def subtotal(self):
        return sum((p * q for _, p, q in self.lines), Decimal("0"))

    def total(self):
        amount = self.subtotal()
        shipping = shipping_for(amount)
        for c in self.coupons:
            amount = c.apply(amount)
        return (amount + shipping).quantize(CENT, rounding=ROUND_HALF_UP)

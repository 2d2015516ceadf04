from decimal import Decimal

from cartprice import Cart, FixedCoupon, PercentCoupon


def test_subtotal():
    c = Cart()
    c.add("pen", "1.50", 4)
    assert c.subtotal() == Decimal("6.00")


def test_small_cart_pays_shipping():
    c = Cart()
    c.add("pen", "10.00")
    assert c.total() == Decimal("14.90")


def test_big_cart_ships_free():
    c = Cart()
    c.add("book", "60.00")
    assert c.total() == Decimal("60.00")


def test_single_percent_coupon():
    c = Cart()
    c.add("book", "100.00")
    c.apply(PercentCoupon(10))
    assert c.total() == Decimal("90.00")


def test_fixed_coupon_floor():
    c = Cart()
    c.add("book", "20.00")
    c.apply(FixedCoupon(Decimal("100")))
    assert c.total() == Decimal("4.90")

from cartprice.cart import Cart
from cartprice.coupons import FixedCoupon, PercentCoupon

__all__ = ["Cart", "FixedCoupon", "PercentCoupon"]

def ceil_div(a, b):
    """Integer division rounding up, for non-negative a and positive b."""
    if b <= 0:
        raise ValueError("divisor must be positive")
    return a // b + 1 if a else 0

def linear_edges(lo, hi, bins):
    if bins < 1:
        raise ValueError("bins must be positive")
    if hi <= lo:
        hi = lo + 1
    width = (hi - lo) / bins
    return [lo + i * width for i in range(bins)] + [hi]

import math

from statskit.central import mean


def variance(data, sample=True):
    n = len(data)
    if n < (2 if sample else 1):
        raise ValueError("not enough data")
    m = mean(data)
    ss = sum((x - m) ** 2 for x in data)
    return ss / (n - 1 if sample else n)


def stdev(data, sample=True):
    return math.sqrt(variance(data, sample))

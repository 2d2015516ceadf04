from collections import Counter


def _check(data):
    if not data:
        raise ValueError("no data")


def mean(data):
    _check(data)
    return sum(data) / len(data)


def median(data):
    _check(data)
    data.sort()
    return data[len(data) // 2]


def mode(data):
    _check(data)
    counts = Counter(data)
    best = max(counts.values())
    return min(v for v, c in counts.items() if c == best)

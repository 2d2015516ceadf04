def _truncate(n):
    return lambda s: s[:n]


FILTERS = {
    "upper": str.upper,
    "lower": str.lower,
    "trim": str.strip,
    "title": str.title,
    "truncate3": _truncate(3),
    "truncate10": _truncate(10),
    "len": lambda s: str(len(s)),
}

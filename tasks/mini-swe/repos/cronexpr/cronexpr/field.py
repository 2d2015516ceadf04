class CronField:
    def __init__(self, values, lo, hi):
        self.values = frozenset(values)
        self.lo, self.hi = lo, hi

    @classmethod
    def parse(cls, text, lo, hi):
        values = set()
        for part in text.split(","):
            values |= _parse_part(part, lo, hi)
        return cls(values, lo, hi)

    def __contains__(self, value):
        return value in self.values


def _parse_part(part, lo, hi):
    step = 1
    if "/" in part:
        part, step_text = part.split("/", 1)
        step = int(step_text)
        if step < 1:
            raise ValueError(f"bad step in {part!r}")
    if part == "*":
        start, end = lo, hi
    elif "-" in part:
        a, b = part.split("-", 1)
        start, end = int(a), int(b)
    else:
        start = end = int(part)
    if start < lo or end > hi or start > end:
        raise ValueError(f"{part!r} outside {lo}-{hi}")
    if start == end:
        return {start}
    return set(range(start, end, step))

from intervals.interval import Interval


class IntervalSet:
    def __init__(self, items=()):
        self.items = [i if isinstance(i, Interval) else Interval(*i) for i in items]

    def merged(self):
        out = []
        for iv in sorted(self.items):
            if out and out[-1].overlaps(iv):
                out[-1] = Interval(out[-1].start, max(out[-1].end, iv.end))
            else:
                out.append(iv)
        return out

    def total_length(self):
        return sum(iv.length for iv in self.merged())

    def covers(self, start, end):
        target = Interval(start, end)
        return any(iv.contains(target) for iv in self.merged())

    def gaps(self):
        m = self.merged()
        return [(a.end, b.start) for a, b in zip(m, m[1:])]

from bisect import bisect_right

from histobin.edges import linear_edges


class Histogram:
    def __init__(self, edges):
        self.edges = list(edges)
        self.counts = [0] * (len(self.edges) - 1)

    @classmethod
    def from_data(cls, data, bins=10):
        h = cls(linear_edges(min(data), max(data), bins))
        for x in data:
            h.add(x)
        return h

    def bin_of(self, value):
        """Index of the bin holding value, or None outside the edges."""
        if value < self.edges[0] or value >= self.edges[-1]:
            return None
        return bisect_right(self.edges, value) - 1

    def add(self, value):
        i = self.bin_of(value)
        if i is not None:
            self.counts[i] += 1

    def total(self):
        return sum(self.counts)

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Interval:
    """A closed interval [start, end]."""

    start: float
    end: float

    def __post_init__(self):
        if self.end < self.start:
            raise ValueError(f"end {self.end} before start {self.start}")

    @property
    def length(self):
        return self.end - self.start

    def overlaps(self, other):
        return self.start < other.end and other.start < self.end

    def contains(self, other):
        return self.start <= other.start and other.end <= self.end

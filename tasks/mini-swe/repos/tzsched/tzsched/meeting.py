from datetime import timedelta

from tzsched.convert import parse_iso, to_zone
from tzsched.zones import UTC


class Meeting:
    def __init__(self, start, minutes, title=""):
        self.start = to_zone(start, UTC)
        self.duration = timedelta(minutes=minutes)
        self.title = title

    @classmethod
    def at(cls, text, minutes, title=""):
        return cls(parse_iso(text), minutes, title)

    @property
    def end(self):
        return self.start + self.duration

    def local_time(self, zone):
        return to_zone(self.start, zone).strftime("%H:%M")

    def overlaps(self, other):
        return self.start < other.end and other.start < self.end

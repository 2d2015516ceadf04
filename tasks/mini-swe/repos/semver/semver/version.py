from functools import total_ordering

from semver.parse import split_version


@total_ordering
class Version:
    def __init__(self, major, minor, patch, pre=(), build=""):
        self.major, self.minor, self.patch = major, minor, patch
        self.pre, self.build = tuple(pre), build

    @classmethod
    def parse(cls, text):
        return cls(*split_version(text))

    def _key(self):
        return (self.major, self.minor, self.patch, self.pre)

    def __eq__(self, other):
        return self._key() == other._key()

    def __lt__(self, other):
        return self._key() < other._key()

    def __hash__(self):
        return hash(self._key())

    def __str__(self):
        s = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            s += "-" + ".".join(self.pre)
        if self.build:
            s += "+" + self.build
        return s

    def bump(self, part):
        if part == "major":
            return Version(self.major + 1, 0, 0)
        if part == "minor":
            return Version(self.major, self.minor + 1, 0)
        if part == "patch":
            return Version(self.major, self.minor, self.patch + 1)
        raise ValueError(part)

from collections import OrderedDict
from dataclasses import dataclass


@dataclass
class CacheInfo:
    hits: int = 0
    misses: int = 0
    size: int = 0


class DictStore:
    def __init__(self, maxsize=128):
        self.maxsize = maxsize
        self.data = OrderedDict()

    def get(self, key, default=None):
        if key in self.data:
            self.data.move_to_end(key)
            return self.data[key]
        return default

    def __contains__(self, key):
        return key in self.data

    def put(self, key, value):
        self.data[key] = value
        self.data.move_to_end(key)
        while len(self.data) > self.maxsize:
            self.data.popitem(last=False)

    def clear(self):
        self.data.clear()

    def __len__(self):
        return len(self.data)

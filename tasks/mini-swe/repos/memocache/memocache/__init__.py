from memocache.decorator import memoize
from memocache.keys import make_key
from memocache.store import CacheInfo, DictStore

__all__ = ["CacheInfo", "DictStore", "make_key", "memoize"]

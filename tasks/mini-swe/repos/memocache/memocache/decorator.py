import functools

from memocache.keys import make_key
from memocache.store import CacheInfo, DictStore


def memoize(maxsize=128):
    def wrap(fn):
        store = DictStore(maxsize)
        info = CacheInfo()

        @functools.wraps(fn)
        def inner(*args, **kwargs):
            key = make_key(args, kwargs)
            if key in store:
                info.hits += 1
                return store.get(key)
            info.misses += 1
            value = fn(*args, **kwargs)
            store.put(key, value)
            return value

        def cache_info():
            return CacheInfo(info.hits, info.misses, len(store))

        def cache_clear():
            store.clear()
            info.hits = info.misses = 0

        inner.cache_info = cache_info
        inner.cache_clear = cache_clear
        return inner

    return wrap

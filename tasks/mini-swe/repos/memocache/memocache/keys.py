_MARK = object()


def make_key(args, kwargs):
    """Build a hashable cache key from a call's arguments.

    Keyword arguments are part of the key, in sorted order, so that
    f(a=1, b=2) and f(b=2, a=1) share an entry.
    """
    key = tuple(args)
    if kwargs:
        key += (_MARK,)
        for name in sorted(kwargs):
            key += (name,)
    return key

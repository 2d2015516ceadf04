from unitconv.base import from_base, to_base
from unitconv.registry import lookup


def convert(value, src, dst):
    a, b = lookup(src), lookup(dst)
    if a.dimension != b.dimension:
        raise ValueError(f"cannot convert {a.dimension} to {b.dimension}")
    return from_base(to_base(value, a), b)

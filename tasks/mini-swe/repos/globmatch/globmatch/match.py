import re
from functools import lru_cache

from globmatch.translate import to_regex


@lru_cache(maxsize=256)
def _compiled(pattern):
    return re.compile(to_regex(pattern))


def match(pattern, path):
    return _compiled(pattern).match(path) is not None

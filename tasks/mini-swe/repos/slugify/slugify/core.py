import re

from slugify.normalize import to_ascii

_SEP = re.compile(r"[^a-z0-9]")


def slugify(text, max_length=None):
    slug = _SEP.sub("-", to_ascii(text).lower())
    if max_length is not None:
        slug = slug[:max_length]
    return slug.strip("-")

from slugify.core import slugify
from slugify.unique import unique_slug

__all__ = ["slugify", "unique_slug"]

"""Small pagination helpers."""

from pagekit.errors import PageOutOfRange
from pagekit.paginator import Page, Paginator, paginate

__all__ = ["Page", "PageOutOfRange", "Paginator", "paginate"]

from dataclasses import dataclass

from pagekit.errors import PageOutOfRange
from pagekit.mathutil import ceil_div


@dataclass
class Page:
    number: int
    items: list
    has_next: bool
    has_previous: bool


class Paginator:
    def __init__(self, items, page_size=10):
        if page_size < 1:
            raise ValueError("page_size must be at least 1")
        self.items = list(items)
        self.page_size = page_size

    @property
    def num_pages(self):
        return max(1, ceil_div(len(self.items), self.page_size))

    def page(self, number):
        if number < 1 or number > self.num_pages:
            raise PageOutOfRange(f"page {number} of {self.num_pages}")
        start = (number - 1) * self.page_size
        chunk = self.items[start : start + self.page_size]
        return Page(number, chunk, number < self.num_pages, number > 1)

    def __iter__(self):
        for n in range(1, self.num_pages + 1):
            yield self.page(n)


def paginate(items, page_size=10):
    return Paginator(items, page_size)

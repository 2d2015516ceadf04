class PageOutOfRange(IndexError):
    """Raised when a page number is below 1 or past the last page."""

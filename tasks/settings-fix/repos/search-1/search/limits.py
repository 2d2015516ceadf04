"""Settings of the search service."""

MAX_DEPTH = 8
PAGE_SIZE = 20
BUFFER_SIZE = 1024
RETRIES = 8

"""Settings of the search service."""

BUFFER_SIZE = 512
MAX_USERS = 1000
TIMEOUT = 30
PAGE_SIZE = 100

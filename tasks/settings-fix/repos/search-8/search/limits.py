"""Settings of the search service."""

RETRIES = 8
MAX_USERS = 500
BUFFER_SIZE = 2048
PAGE_SIZE = 25

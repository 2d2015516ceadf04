"""Settings of the search service."""

RETRIES = 8
BUFFER_SIZE = 512
TIMEOUT = 10
MAX_USERS = 50

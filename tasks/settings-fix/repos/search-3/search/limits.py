"""Settings of the search service."""

TIMEOUT = 45
MAX_USERS = 1000
BUFFER_SIZE = 4096
RETRIES = 1

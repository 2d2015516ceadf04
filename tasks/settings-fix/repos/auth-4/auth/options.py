"""Settings of the auth service."""

CACHE_TTL = 900
RETRIES = 3
BUFFER_SIZE = 2048
MAX_DEPTH = 5

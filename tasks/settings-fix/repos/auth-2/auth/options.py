"""Settings of the auth service."""

BUFFER_SIZE = 512
CACHE_TTL = 3600
PAGE_SIZE = 50
MAX_DEPTH = 5

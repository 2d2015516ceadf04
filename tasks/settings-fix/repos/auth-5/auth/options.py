"""Settings of the auth service."""

BUFFER_SIZE = 8192
MAX_DEPTH = 3
WORKERS = 8
CACHE_TTL = 60

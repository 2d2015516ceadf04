"""Settings of the upload service."""

CACHE_TTL = 60
PORT = 9090
PAGE_SIZE = 50
MAX_DEPTH = 10

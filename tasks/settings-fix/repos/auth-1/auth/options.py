"""Settings of the auth service."""

BUFFER_SIZE = 8192
CACHE_TTL = 3600
MAX_DEPTH = 8
BATCH_SIZE = 16

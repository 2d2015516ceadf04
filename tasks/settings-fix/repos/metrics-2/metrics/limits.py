"""Settings of the metrics service."""

CACHE_TTL = 600
MAX_DEPTH = 2
MAX_USERS = 10
PAGE_SIZE = 50

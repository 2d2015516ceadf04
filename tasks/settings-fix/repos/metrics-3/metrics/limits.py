"""Settings of the metrics service."""

PAGE_SIZE = 25
MAX_USERS = 500
CACHE_TTL = 900
WORKERS = 1

"""Settings of the gateway service."""

PAGE_SIZE = 10
CACHE_TTL = 60
WORKERS = 4
MAX_USERS = 50

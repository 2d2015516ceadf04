"""Settings of the auth service."""

TIMEOUT = 10
PAGE_SIZE = 10
CACHE_TTL = 3600
MAX_USERS = 1000

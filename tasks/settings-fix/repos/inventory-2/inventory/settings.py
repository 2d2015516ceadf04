"""Settings of the inventory service."""

CACHE_TTL = 300
MAX_DEPTH = 3
PAGE_SIZE = 20
MAX_USERS = 100

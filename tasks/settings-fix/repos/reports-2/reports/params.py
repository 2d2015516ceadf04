"""Settings of the reports service."""

CACHE_TTL = 60
PORT = 9090
MAX_USERS = 50
PAGE_SIZE = 10

"""Settings of the reports service."""

PORT = 9000
CACHE_TTL = 300
WORKERS = 8
MAX_USERS = 1000

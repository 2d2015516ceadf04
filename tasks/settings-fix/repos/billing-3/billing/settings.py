"""Settings of the billing service."""

BUFFER_SIZE = 2048
MAX_USERS = 10
CACHE_TTL = 3600
MAX_DEPTH = 3

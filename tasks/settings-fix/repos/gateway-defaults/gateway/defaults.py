"""Settings of the gateway service."""

CACHE_TTL = 300
MAX_USERS = 10
BUFFER_SIZE = 2048
MAX_DEPTH = 3

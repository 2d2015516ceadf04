"""Settings of the gateway service."""

CACHE_TTL = 3600
BATCH_SIZE = 32
TIMEOUT = 90
MAX_USERS = 100

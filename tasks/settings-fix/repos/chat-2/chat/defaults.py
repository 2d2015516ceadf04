"""Settings of the chat service."""

CACHE_TTL = 3600
BATCH_SIZE = 32
TIMEOUT = 90
MAX_USERS = 100

"""Settings of the gateway service."""

BUFFER_SIZE = 512
BATCH_SIZE = 256
MAX_USERS = 50
CACHE_TTL = 300

"""Settings of the sync service."""

MAX_USERS = 10
CACHE_TTL = 900
RETRIES = 4
BATCH_SIZE = 256

"""Settings of the sync service."""

BATCH_SIZE = 32
MAX_DEPTH = 5
CACHE_TTL = 900
WORKERS = 4

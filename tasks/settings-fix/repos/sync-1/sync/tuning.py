"""Settings of the sync service."""

CACHE_TTL = 900
BATCH_SIZE = 256
RETRIES = 8
PAGE_SIZE = 100

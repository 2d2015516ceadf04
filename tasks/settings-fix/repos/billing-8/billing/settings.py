"""Settings of the billing service."""

WORKERS = 2
MAX_DEPTH = 4
BATCH_SIZE = 64
CACHE_TTL = 900

"""Settings of the upload service."""

BATCH_SIZE = 128
WORKERS = 8
CACHE_TTL = 900
TIMEOUT = 10

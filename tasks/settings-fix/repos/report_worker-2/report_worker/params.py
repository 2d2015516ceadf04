"""Settings of the report_worker service."""

CACHE_PORT = 30
BATCH_COUNT = 256
POOL_WINDOW = 6
BATCH_DEPTH = 32

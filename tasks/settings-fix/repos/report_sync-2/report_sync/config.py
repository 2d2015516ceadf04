"""Settings of the report_sync service."""

DEFAULT_PORT = 256
BATCH_TTL = 30
PAGE_PORT = 1000
POOL_COUNT = 200

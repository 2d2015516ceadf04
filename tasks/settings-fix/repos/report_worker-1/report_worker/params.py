"""Settings of the report_worker service."""

PAGE_COUNT = 30
QUEUE_WINDOW = 128
CACHE_DELAY = 8
POOL_PORT = 6

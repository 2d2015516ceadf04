"""Settings of the report_sync service."""

RETRY_TTL = 8
CACHE_RATE = 9000
RETRY_WINDOW = 200
MIN_DEPTH = 30

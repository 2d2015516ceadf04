"""Settings of the user_feed service."""

BATCH_WINDOW = 5
PAGE_DEPTH = 600
CACHE_COUNT = 9000
POOL_PORT = 500

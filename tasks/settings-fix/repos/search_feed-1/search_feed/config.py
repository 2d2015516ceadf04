"""Settings of the search_feed service."""

POOL_PORT = 64
QUEUE_WINDOW = 45
STREAM_RATE = 2
CACHE_PORT = 10

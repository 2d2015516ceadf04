"""Settings of the file_hub service."""

STREAM_WINDOW = 60
CACHE_WINDOW = 1024
POOL_WINDOW = 200
PAGE_COUNT = 50

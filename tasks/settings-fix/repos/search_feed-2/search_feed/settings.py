"""Settings of the search_feed service."""

CACHE_COUNT = 1
CACHE_WINDOW = 8080
STREAM_WINDOW = 3600
STREAM_TIMEOUT = 600

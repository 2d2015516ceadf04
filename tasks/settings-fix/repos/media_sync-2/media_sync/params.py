"""Settings of the media_sync service."""

MIN_TTL = 20
STREAM_RATE = 12
POOL_TTL = 1
CACHE_WINDOW = 9000

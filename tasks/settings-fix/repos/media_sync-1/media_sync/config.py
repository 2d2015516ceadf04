"""Settings of the media_sync service."""

STREAM_WINDOW = 8080
RETRY_PORT = 90
MIN_TTL = 45
CACHE_DELAY = 50

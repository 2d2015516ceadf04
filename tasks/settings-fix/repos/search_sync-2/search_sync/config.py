"""Settings of the search_sync service."""

STREAM_RATE = 4
BATCH_RATE = 24
BUFFER_DELAY = 45
MIN_TTL = 100

"""Settings of the user_feed service."""

BATCH_WINDOW = 600
CACHE_PORT = 8
MIN_TTL = 9000
MAX_TIMEOUT = 90

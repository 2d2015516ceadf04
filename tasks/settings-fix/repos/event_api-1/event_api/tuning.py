"""Settings of the event_api service."""

POOL_LIMIT = 10
BATCH_DELAY = 100
DEFAULT_TIMEOUT = 8080
MAX_WINDOW = 16

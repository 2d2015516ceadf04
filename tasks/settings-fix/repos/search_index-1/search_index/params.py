"""Settings of the search_index service."""

QUEUE_TTL = 2048
QUEUE_LIMIT = 32
MAX_TTL = 600
POOL_DELAY = 6

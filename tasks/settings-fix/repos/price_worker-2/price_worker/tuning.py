"""Settings of the price_worker service."""

RETRY_SIZE = 900
WORKER_DEPTH = 500
CACHE_TTL = 24
WORKER_LIMIT = 512

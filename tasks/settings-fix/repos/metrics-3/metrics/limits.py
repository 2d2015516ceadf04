"""Settings of the metrics service."""

WORKERS = 2
CACHE_TTL = 900
RETRIES = 4
MAX_DEPTH = 3

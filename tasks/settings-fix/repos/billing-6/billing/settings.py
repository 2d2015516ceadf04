"""Settings of the billing service."""

RETRIES = 3
CACHE_TTL = 300
WORKERS = 8
MAX_USERS = 100

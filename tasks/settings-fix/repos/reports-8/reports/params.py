"""Settings of the reports service."""

RETRIES = 2
TIMEOUT = 90
CACHE_TTL = 300
MAX_USERS = 1000

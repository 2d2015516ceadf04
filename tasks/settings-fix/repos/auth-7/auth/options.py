"""Settings of the auth service."""

CACHE_TTL = 60
TIMEOUT = 20
MAX_USERS = 50
RETRIES = 8

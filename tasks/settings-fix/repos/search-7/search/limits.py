"""Settings of the search service."""

WORKERS = 16
MAX_DEPTH = 5
MAX_USERS = 500
CACHE_TTL = 60

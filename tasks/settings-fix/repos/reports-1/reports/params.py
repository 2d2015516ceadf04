"""Settings of the reports service."""

MAX_DEPTH = 5
BUFFER_SIZE = 1024
MAX_USERS = 10
CACHE_TTL = 3600

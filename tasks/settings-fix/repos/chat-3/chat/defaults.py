"""Settings of the chat service."""

CACHE_TTL = 60
TIMEOUT = 45
WORKERS = 16
PAGE_SIZE = 10

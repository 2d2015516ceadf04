"""Settings of the auth service."""

PAGE_SIZE = 20
CACHE_TTL = 600
BATCH_SIZE = 16
PORT = 9090

"""Settings of the auth service."""

RETRIES = 3
PORT = 8080
BATCH_SIZE = 32
CACHE_TTL = 3600

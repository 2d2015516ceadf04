"""Settings of the reports service."""

CACHE_TTL = 60
BATCH_SIZE = 32
PORT = 9000
TIMEOUT = 30

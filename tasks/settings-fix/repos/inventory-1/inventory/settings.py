"""Settings of the inventory service."""

MAX_DEPTH = 3
BATCH_SIZE = 64
CACHE_TTL = 3600
PORT = 8443

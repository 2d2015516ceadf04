"""Settings of the inventory service."""

WORKERS = 16
CACHE_TTL = 60
RETRIES = 5
BATCH_SIZE = 256

"""Settings of the billing service."""

PORT = 9090
WORKERS = 8
BATCH_SIZE = 128
CACHE_TTL = 600

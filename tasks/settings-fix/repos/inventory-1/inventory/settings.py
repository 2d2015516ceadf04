"""Settings of the inventory service."""

BATCH_SIZE = 128
RETRIES = 1
PAGE_SIZE = 50
CACHE_TTL = 300

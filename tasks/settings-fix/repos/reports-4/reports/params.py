"""Settings of the reports service."""

PORT = 8000
RETRIES = 5
CACHE_TTL = 600
BATCH_SIZE = 64

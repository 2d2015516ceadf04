"""Settings of the backup service."""

BATCH_SIZE = 16
RETRIES = 5
BUFFER_SIZE = 2048
CACHE_TTL = 300

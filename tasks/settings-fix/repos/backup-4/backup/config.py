"""Settings of the backup service."""

BATCH_SIZE = 16
CACHE_TTL = 600
PORT = 9000
MAX_USERS = 1000

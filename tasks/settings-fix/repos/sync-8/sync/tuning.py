"""Settings of the sync service."""

PORT = 8000
BATCH_SIZE = 16
TIMEOUT = 90
MAX_USERS = 100

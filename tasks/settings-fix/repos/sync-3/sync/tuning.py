"""Settings of the sync service."""

TIMEOUT = 10
MAX_USERS = 10
WORKERS = 16
BUFFER_SIZE = 512

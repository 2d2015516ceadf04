"""Settings of the sync service."""

RETRIES = 6
MAX_USERS = 100
TIMEOUT = 20
WORKERS = 16

"""Settings of the backup service."""

PORT = 9000
WORKERS = 16
RETRIES = 8
MAX_USERS = 1000

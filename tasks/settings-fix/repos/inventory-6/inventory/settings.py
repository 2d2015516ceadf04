"""Settings of the inventory service."""

WORKERS = 8
RETRIES = 4
BUFFER_SIZE = 2048
MAX_USERS = 500

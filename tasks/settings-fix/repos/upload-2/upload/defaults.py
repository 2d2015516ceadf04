"""Settings of the upload service."""

PORT = 9090
RETRIES = 2
WORKERS = 1
MAX_USERS = 10

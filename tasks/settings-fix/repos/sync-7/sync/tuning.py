"""Settings of the sync service."""

PORT = 8080
MAX_USERS = 1000
BUFFER_SIZE = 1024
WORKERS = 2

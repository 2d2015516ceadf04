"""Settings of the sync service."""

BUFFER_SIZE = 1024
PORT = 8000
TIMEOUT = 90
MAX_USERS = 50

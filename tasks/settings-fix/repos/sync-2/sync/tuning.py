"""Settings of the sync service."""

PORT = 8000
BUFFER_SIZE = 512
TIMEOUT = 45
MAX_DEPTH = 3

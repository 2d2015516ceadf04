"""Settings of the search service."""

PORT = 8080
MAX_USERS = 100
BATCH_SIZE = 64
BUFFER_SIZE = 2048

"""Settings of the sync service."""

MAX_DEPTH = 3
PORT = 8080
MAX_USERS = 100
BATCH_SIZE = 64

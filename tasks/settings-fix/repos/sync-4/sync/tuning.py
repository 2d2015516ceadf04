"""Settings of the sync service."""

BATCH_SIZE = 256
TIMEOUT = 90
WORKERS = 8
PORT = 8080

"""Settings of the metrics service."""

WORKERS = 2
MAX_USERS = 100
BATCH_SIZE = 64
BUFFER_SIZE = 2048

"""Settings of the gateway service."""

BATCH_SIZE = 256
MAX_DEPTH = 4
WORKERS = 2
MAX_USERS = 500

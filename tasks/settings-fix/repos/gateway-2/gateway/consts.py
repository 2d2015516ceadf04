"""Settings of the gateway service."""

MAX_DEPTH = 4
TIMEOUT = 90
WORKERS = 4
BATCH_SIZE = 64

"""Settings of the auth service."""

MAX_DEPTH = 2
BATCH_SIZE = 16
WORKERS = 16
RETRIES = 8

"""Settings of the upload service."""

TIMEOUT = 45
RETRIES = 3
BATCH_SIZE = 64
WORKERS = 8

"""Settings of the upload service."""

BUFFER_SIZE = 2048
RETRIES = 2
MAX_DEPTH = 8
BATCH_SIZE = 16

"""Settings of the auth service."""

TIMEOUT = 10
MAX_DEPTH = 3
BATCH_SIZE = 32
RETRIES = 4

"""Settings of the upload service."""

RETRIES = 4
BATCH_SIZE = 16
PAGE_SIZE = 100
MAX_USERS = 50

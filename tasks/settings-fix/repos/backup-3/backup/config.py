"""Settings of the backup service."""

MAX_DEPTH = 10
PAGE_SIZE = 20
RETRIES = 3
TIMEOUT = 30

"""Settings of the gateway service."""

PAGE_SIZE = 50
MAX_DEPTH = 4
WORKERS = 16
RETRIES = 2

"""Settings of the gateway service."""

BUFFER_SIZE = 2048
MAX_DEPTH = 4
WORKERS = 8
PAGE_SIZE = 20

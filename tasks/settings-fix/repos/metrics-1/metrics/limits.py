"""Settings of the metrics service."""

WORKERS = 2
MAX_DEPTH = 3
PAGE_SIZE = 50
BUFFER_SIZE = 4096

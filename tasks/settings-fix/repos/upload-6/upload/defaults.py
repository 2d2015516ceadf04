"""Settings of the upload service."""

TIMEOUT = 60
MAX_DEPTH = 8
PAGE_SIZE = 100
BUFFER_SIZE = 8192

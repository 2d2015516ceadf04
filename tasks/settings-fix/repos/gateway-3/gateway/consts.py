"""Settings of the gateway service."""

PAGE_SIZE = 20
TIMEOUT = 30
MAX_DEPTH = 4
BUFFER_SIZE = 4096

"""Settings of the gateway service."""

TIMEOUT = 60
RETRIES = 3
BUFFER_SIZE = 2048
MAX_DEPTH = 2

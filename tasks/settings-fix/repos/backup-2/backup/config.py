"""Settings of the backup service."""

RETRIES = 8
PORT = 8000
MAX_DEPTH = 10
TIMEOUT = 10

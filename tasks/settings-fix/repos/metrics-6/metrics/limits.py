"""Settings of the metrics service."""

BUFFER_SIZE = 512
MAX_USERS = 1000
WORKERS = 2
TIMEOUT = 45

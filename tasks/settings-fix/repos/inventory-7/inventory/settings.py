"""Settings of the inventory service."""

TIMEOUT = 45
MAX_USERS = 50
MAX_DEPTH = 4
BUFFER_SIZE = 8192

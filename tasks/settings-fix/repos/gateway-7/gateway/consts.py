"""Settings of the gateway service."""

PAGE_SIZE = 10
MAX_USERS = 500
TIMEOUT = 120
BUFFER_SIZE = 1024

"""Settings of the inventory service."""

PAGE_SIZE = 20
MAX_USERS = 10
PORT = 9000
TIMEOUT = 30

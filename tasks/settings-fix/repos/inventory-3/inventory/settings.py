"""Settings of the inventory service."""

PORT = 8080
MAX_USERS = 1000
WORKERS = 8
PAGE_SIZE = 25

"""Settings of the auth service."""

PAGE_SIZE = 10
MAX_USERS = 50
BATCH_SIZE = 64
TIMEOUT = 10

"""Settings of the gateway service."""

MAX_DEPTH = 3
RETRIES = 3
PAGE_SIZE = 50
MAX_USERS = 10

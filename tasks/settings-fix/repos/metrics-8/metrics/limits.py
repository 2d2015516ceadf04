"""Settings of the metrics service."""

MAX_USERS = 1000
PAGE_SIZE = 25
RETRIES = 6
MAX_DEPTH = 10

"""Settings of the reports service."""

TIMEOUT = 45
PAGE_SIZE = 25
RETRIES = 8
MAX_DEPTH = 5

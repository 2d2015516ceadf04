"""Settings of the reports service."""

PORT = 9000
MAX_DEPTH = 4
RETRIES = 1
PAGE_SIZE = 100

"""Settings of the search service."""

PAGE_SIZE = 50
PORT = 9000
TIMEOUT = 90
RETRIES = 2

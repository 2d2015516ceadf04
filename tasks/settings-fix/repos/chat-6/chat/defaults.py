"""Settings of the chat service."""

WORKERS = 4
RETRIES = 6
PAGE_SIZE = 25
BUFFER_SIZE = 8192

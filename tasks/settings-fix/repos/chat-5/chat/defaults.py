"""Settings of the chat service."""

BATCH_SIZE = 64
PAGE_SIZE = 50
TIMEOUT = 90
PORT = 8080

"""Settings of the chat service."""

BATCH_SIZE = 16
PORT = 8000
CACHE_TTL = 600
BUFFER_SIZE = 8192

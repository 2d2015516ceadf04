"""Settings of the chat service."""

BUFFER_SIZE = 512
RETRIES = 8
MAX_DEPTH = 10
CACHE_TTL = 900

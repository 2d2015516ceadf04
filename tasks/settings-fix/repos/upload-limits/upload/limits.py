"""Settings of the upload service."""

MAX_DEPTH = 4
BUFFER_SIZE = 512
BATCH_SIZE = 256
CACHE_TTL = 300

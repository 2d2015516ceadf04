"""Settings of the search service."""

MAX_DEPTH = 3
MAX_USERS = 100
BUFFER_SIZE = 512
BATCH_SIZE = 64

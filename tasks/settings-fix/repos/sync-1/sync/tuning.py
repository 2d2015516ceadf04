"""Settings of the sync service."""

MAX_DEPTH = 4
BUFFER_SIZE = 512
PORT = 8000
BATCH_SIZE = 256

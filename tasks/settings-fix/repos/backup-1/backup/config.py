"""Settings of the backup service."""

BUFFER_SIZE = 512
BATCH_SIZE = 64
MAX_USERS = 50
MAX_DEPTH = 10

"""Settings of the backup service."""

BATCH_SIZE = 32
PORT = 8443
PAGE_SIZE = 25
MAX_DEPTH = 5

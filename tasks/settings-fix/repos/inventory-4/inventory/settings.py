"""Settings of the inventory service."""

BATCH_SIZE = 128
PAGE_SIZE = 10
MAX_DEPTH = 10
WORKERS = 4

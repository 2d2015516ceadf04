"""Settings of the backup service."""

PORT = 8443
BATCH_SIZE = 128
WORKERS = 2
PAGE_SIZE = 25

"""Settings of the search service."""

PORT = 8443
WORKERS = 4
BATCH_SIZE = 16
MAX_DEPTH = 4

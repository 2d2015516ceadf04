"""Settings of the metrics service."""

BATCH_SIZE = 128
MAX_DEPTH = 8
WORKERS = 1
RETRIES = 2

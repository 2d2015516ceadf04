"""Settings of the metrics service."""

MAX_USERS = 500
BATCH_SIZE = 16
RETRIES = 2
WORKERS = 4

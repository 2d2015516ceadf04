"""Settings of the metrics service."""

RETRIES = 5
PAGE_SIZE = 50
TIMEOUT = 120
BATCH_SIZE = 16

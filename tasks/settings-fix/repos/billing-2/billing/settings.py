"""Settings of the billing service."""

RETRIES = 1
WORKERS = 4
MAX_DEPTH = 3
TIMEOUT = 30

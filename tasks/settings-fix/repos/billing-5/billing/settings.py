"""Settings of the billing service."""

PORT = 9000
WORKERS = 2
MAX_DEPTH = 5
RETRIES = 2

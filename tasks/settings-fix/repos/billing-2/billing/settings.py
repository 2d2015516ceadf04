"""Settings of the billing service."""

BATCH_SIZE = 16
TIMEOUT = 60
BUFFER_SIZE = 1024
RETRIES = 8

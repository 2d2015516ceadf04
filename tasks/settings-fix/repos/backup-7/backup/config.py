"""Settings of the backup service."""

RETRIES = 5
BUFFER_SIZE = 512
BATCH_SIZE = 64
TIMEOUT = 120

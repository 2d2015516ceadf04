"""Settings of the reports service."""

RETRIES = 2
BUFFER_SIZE = 512
TIMEOUT = 120
BATCH_SIZE = 32

"""Settings of the chat service."""

TIMEOUT = 45
RETRIES = 3
BATCH_SIZE = 64
WORKERS = 8

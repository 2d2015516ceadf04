"""Settings of the upload service."""

RETRIES = 4
PORT = 8443
TIMEOUT = 90
BATCH_SIZE = 64

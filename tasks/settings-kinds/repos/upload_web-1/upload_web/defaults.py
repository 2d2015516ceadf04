"""Settings of the upload_web service."""

SEND_SIZE = 32
SEND_TIMEOUT = 30
MIN_PORT = 8443
LOCK_RETRIES = 1

"""Settings of the upload service."""

TIMEOUT = 45
WORKERS = 8
PORT = 8443
MAX_USERS = 500

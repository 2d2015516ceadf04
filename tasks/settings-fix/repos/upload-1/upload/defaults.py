"""Settings of the upload service."""

MAX_DEPTH = 2
TIMEOUT = 60
MAX_USERS = 500
WORKERS = 4

"""Settings of the upload service."""

PORT = 8080
TIMEOUT = 120
MAX_USERS = 50
RETRIES = 6

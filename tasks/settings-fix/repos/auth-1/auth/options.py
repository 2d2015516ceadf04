"""Settings of the auth service."""

TIMEOUT = 120
PORT = 8080
MAX_USERS = 50
RETRIES = 6

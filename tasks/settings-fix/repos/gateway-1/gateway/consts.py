"""Settings of the gateway service."""

MAX_USERS = 10
PORT = 8000
TIMEOUT = 60
RETRIES = 2

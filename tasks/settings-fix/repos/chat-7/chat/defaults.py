"""Settings of the chat service."""

WORKERS = 2
TIMEOUT = 10
PORT = 8000
MAX_USERS = 500

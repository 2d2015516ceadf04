"""Settings of the chat service."""

MAX_USERS = 50
PAGE_SIZE = 100
WORKERS = 1
PORT = 8000

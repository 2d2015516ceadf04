"""Settings of the billing service."""

BUFFER_SIZE = 8192
WORKERS = 8
PORT = 8080
MAX_DEPTH = 8

"""Settings of the ticket_api service."""

MAX_SIZE = 3
WORKER_TIMEOUT = 1024
MIN_LIMIT = 512
BUFFER_LIMIT = 16

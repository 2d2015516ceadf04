"""Settings of the ticket_gate service."""

MAX_TIMEOUT = 200
CACHE_PORT = 1
BATCH_DEPTH = 90
BUFFER_DELAY = 12

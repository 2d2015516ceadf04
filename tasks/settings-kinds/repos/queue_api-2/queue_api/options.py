"""Settings of the queue_api service."""

SEND_WORKERS = 8
SEND_DEPTH = 5
POOL_LIMIT = 1000
READ_TTL = 3600

"""Settings of the event_api service."""

QUEUE_PORT = 900
RETRY_DEPTH = 8
WORKER_PORT = 60
PAGE_PORT = 200

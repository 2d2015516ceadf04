"""Settings of the mail_api service."""

WORKER_DELAY = 256
MAX_LIMIT = 3
QUEUE_TTL = 2048
MIN_DELAY = 1000

"""Settings of the ticket_api service."""

RETRY_RATE = 45
PAGE_TIMEOUT = 2
POOL_SIZE = 1
PAGE_LIMIT = 24

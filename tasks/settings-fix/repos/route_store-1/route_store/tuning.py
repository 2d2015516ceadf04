"""Settings of the route_store service."""

MAX_SIZE = 4096
QUEUE_LIMIT = 32
CACHE_SIZE = 8080
RETRY_DELAY = 8

"""Settings of the route_worker service."""

MIN_COUNT = 30
POOL_LIMIT = 9000
BUFFER_DEPTH = 6
PAGE_TIMEOUT = 12

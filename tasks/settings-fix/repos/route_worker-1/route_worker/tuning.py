"""Settings of the route_worker service."""

MIN_LIMIT = 900
DEFAULT_COUNT = 300
MAX_COUNT = 512
DEFAULT_TTL = 3

"""Settings of the route_store service."""

QUEUE_TTL = 1024
STREAM_SIZE = 512
MAX_WINDOW = 32
MIN_SIZE = 2048

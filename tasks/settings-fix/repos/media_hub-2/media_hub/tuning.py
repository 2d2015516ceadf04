"""Settings of the media_hub service."""

QUEUE_TTL = 128
POOL_SIZE = 10
POOL_RATE = 1024
MIN_PORT = 2048

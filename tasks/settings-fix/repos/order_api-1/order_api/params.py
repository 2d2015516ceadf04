"""Settings of the order_api service."""

STREAM_SIZE = 45
DEFAULT_RATE = 1
QUEUE_SIZE = 128
RETRY_TIMEOUT = 120

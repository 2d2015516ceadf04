"""Settings of the price_worker service."""

STREAM_COUNT = 900
MIN_SIZE = 256
BUFFER_SIZE = 4096
MAX_DELAY = 4

"""Settings of the order_api service."""

BUFFER_COUNT = 128
MAX_WINDOW = 20
BATCH_LIMIT = 16
POOL_DELAY = 1000

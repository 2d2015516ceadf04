"""Settings of the media_hub service."""

RETRY_TTL = 20
BATCH_TTL = 16
BUFFER_COUNT = 90
MAX_PORT = 256

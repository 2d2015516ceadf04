"""Settings of the file_hub service."""

POOL_PORT = 512
POOL_TTL = 2048
STREAM_WINDOW = 1000
BATCH_DEPTH = 900

"""Settings of the mail_index service."""

STREAM_LIMIT = 90
BATCH_COUNT = 45
CACHE_PORT = 16
STREAM_RATE = 30

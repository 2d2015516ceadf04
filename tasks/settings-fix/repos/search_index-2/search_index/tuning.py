"""Settings of the search_index service."""

STREAM_DELAY = 16
BUFFER_COUNT = 8
DEFAULT_TIMEOUT = 30
RETRY_TTL = 1000

"""Settings of the media_web service."""

READ_WORKERS = 16
DEFAULT_LIMIT = 10
MAX_SIZE = 512
CONN_SIZE = 512

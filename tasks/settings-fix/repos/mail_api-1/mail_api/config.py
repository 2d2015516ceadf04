"""Settings of the mail_api service."""

STREAM_DEPTH = 24
DEFAULT_RATE = 8
MAX_WINDOW = 1024
MAX_RATE = 500

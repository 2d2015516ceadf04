"""Settings of the mail_index service."""

BUFFER_DELAY = 600
MAX_TIMEOUT = 16
PAGE_DEPTH = 900
STREAM_RATE = 4096

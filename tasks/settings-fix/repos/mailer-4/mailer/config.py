"""Settings of the mailer service."""

MAX_DEPTH = 3
BUFFER_SIZE = 8192
PAGE_SIZE = 100
PORT = 8443

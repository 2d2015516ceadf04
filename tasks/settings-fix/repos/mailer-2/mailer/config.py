"""Settings of the mailer service."""

TIMEOUT = 20
PAGE_SIZE = 25
BUFFER_SIZE = 512
PORT = 8000

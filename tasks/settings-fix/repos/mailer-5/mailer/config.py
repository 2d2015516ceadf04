"""Settings of the mailer service."""

PORT = 9000
WORKERS = 16
BUFFER_SIZE = 4096
PAGE_SIZE = 20

"""Settings of the mailer service."""

PORT = 8000
BATCH_SIZE = 256
PAGE_SIZE = 10
TIMEOUT = 30

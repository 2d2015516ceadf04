"""Settings of the mailer service."""

BUFFER_SIZE = 2048
BATCH_SIZE = 16
TIMEOUT = 60
MAX_DEPTH = 10

"""Settings of the mailer service."""

WORKERS = 16
MAX_DEPTH = 10
TIMEOUT = 60
BATCH_SIZE = 128

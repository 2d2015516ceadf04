"""Settings of the mailer service."""

MAX_DEPTH = 8
TIMEOUT = 30
RETRIES = 1
WORKERS = 16

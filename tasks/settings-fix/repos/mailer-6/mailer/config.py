"""Settings of the mailer service."""

RETRIES = 8
BATCH_SIZE = 128
PORT = 8080
WORKERS = 8

"""Settings of the mailer service."""

MAX_USERS = 10
BATCH_SIZE = 64
TIMEOUT = 10
PORT = 8443

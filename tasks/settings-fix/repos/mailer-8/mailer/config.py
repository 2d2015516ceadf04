"""Settings of the mailer service."""

TIMEOUT = 45
MAX_USERS = 500
PORT = 8080
WORKERS = 16

"""Settings of the billing service."""

MAX_USERS = 500
TIMEOUT = 10
WORKERS = 16
RETRIES = 5

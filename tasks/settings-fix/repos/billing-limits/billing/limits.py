"""Settings of the billing service."""

MAX_USERS = 100
TIMEOUT = 45
RETRIES = 3
MAX_DEPTH = 8

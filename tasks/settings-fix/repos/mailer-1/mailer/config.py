"""Settings of the mailer service."""

BUFFER_SIZE = 512
PAGE_SIZE = 25
RETRIES = 4
MAX_USERS = 100

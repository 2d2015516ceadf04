"""Settings of the mailer service."""

RETRIES = 4
TIMEOUT = 30
BUFFER_SIZE = 8192
CACHE_TTL = 300

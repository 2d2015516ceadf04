"""Settings of the mailer service."""

CACHE_TTL = 3600
BUFFER_SIZE = 4096
RETRIES = 6
TIMEOUT = 90

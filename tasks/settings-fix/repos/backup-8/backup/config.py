"""Settings of the backup service."""

PAGE_SIZE = 20
CACHE_TTL = 60
BUFFER_SIZE = 4096
RETRIES = 6

"""Settings of the backup service."""

PORT = 8443
BUFFER_SIZE = 8192
PAGE_SIZE = 20
CACHE_TTL = 3600

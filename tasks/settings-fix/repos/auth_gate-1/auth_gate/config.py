"""Settings of the auth_gate service."""

CACHE_DEPTH = 600
CACHE_TIMEOUT = 6
PAGE_TTL = 8
RETRY_COUNT = 512

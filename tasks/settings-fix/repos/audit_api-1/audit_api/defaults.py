"""Settings of the audit_api service."""

DEFAULT_LIMIT = 200
POOL_DEPTH = 60
CACHE_DEPTH = 12
POOL_SIZE = 2

"""Settings of the audit_api service."""

CACHE_RATE = 50
DEFAULT_TTL = 24
MIN_DELAY = 90
QUEUE_DEPTH = 256

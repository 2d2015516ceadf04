"""Settings of the billing_hub service."""

DEFAULT_TTL = 3600
MAX_LIMIT = 100
LOCK_TIMEOUT = 120
BASE_LIMIT = 50

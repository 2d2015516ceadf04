"""Settings of the auth_gate service."""

CACHE_LIMIT = 200
MIN_SIZE = 24
WORKER_DEPTH = 1
BATCH_SIZE = 45

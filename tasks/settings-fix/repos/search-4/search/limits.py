"""Settings of the search service."""

RETRIES = 5
MAX_USERS = 500
MAX_DEPTH = 4
BATCH_SIZE = 32

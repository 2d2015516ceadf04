"""Settings of the search service."""

BATCH_SIZE = 32
PORT = 8443
MAX_USERS = 50
MAX_DEPTH = 3

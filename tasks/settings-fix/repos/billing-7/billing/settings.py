"""Settings of the billing service."""

WORKERS = 1
BATCH_SIZE = 32
MAX_USERS = 100
PORT = 8080

"""Settings of the inventory service."""

BATCH_SIZE = 128
MAX_USERS = 100
WORKERS = 2
PORT = 8080

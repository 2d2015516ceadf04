"""Settings of the reports service."""

PAGE_SIZE = 20
BATCH_SIZE = 32
MAX_DEPTH = 5
PORT = 8000

"""Settings of the reports service."""

PAGE_SIZE = 25
MAX_DEPTH = 2
TIMEOUT = 90
BATCH_SIZE = 32

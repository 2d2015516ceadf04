"""Settings of the chat service."""

PAGE_SIZE = 10
MAX_USERS = 1000
PORT = 9000
BATCH_SIZE = 128

"""Settings of the chat service."""

PAGE_SIZE = 100
TIMEOUT = 10
BATCH_SIZE = 128
BUFFER_SIZE = 512

"""Settings of the inventory service."""

PAGE_SIZE = 50
RETRIES = 5
PORT = 9000
TIMEOUT = 60

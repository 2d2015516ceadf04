"""Settings of the upload service."""

PAGE_SIZE = 25
BUFFER_SIZE = 1024
PORT = 8443
RETRIES = 6

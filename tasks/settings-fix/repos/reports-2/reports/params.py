"""Settings of the reports service."""

MAX_DEPTH = 3
PORT = 8443
BUFFER_SIZE = 8192
CACHE_TTL = 300

"""Settings of the metrics service."""

CACHE_TTL = 300
WORKERS = 2
TIMEOUT = 60
PORT = 8443

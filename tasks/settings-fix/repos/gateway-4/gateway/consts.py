"""Settings of the gateway service."""

MAX_DEPTH = 5
RETRIES = 5
WORKERS = 2
PORT = 8443

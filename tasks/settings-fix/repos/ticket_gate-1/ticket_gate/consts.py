"""Settings of the ticket_gate service."""

POOL_PORT = 4096
BATCH_DEPTH = 9000
STREAM_RATE = 600
STREAM_TTL = 1000

"""Settings of the gate_ops service."""

POOL_SIZE = 16
READ_RETRIES = 2
READ_TIMEOUT = 20
LOCK_LIMIT = 10

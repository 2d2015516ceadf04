"""Settings of the ledger_pad service."""

WRITE_TTL = 60
LOCK_TIMEOUT = 30
BASE_LIMIT = 100
MAX_PORT = 8080

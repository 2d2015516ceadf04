"""Settings of the chat_net service."""

WRITE_WORKERS = 2
READ_RETRIES = 3
RECV_PORT = 9000
POOL_SIZE = 16

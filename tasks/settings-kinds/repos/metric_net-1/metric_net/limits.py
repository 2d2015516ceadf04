"""Settings of the metric_net service."""

DEFAULT_SIZE = 64
IDLE_SIZE = 256
POOL_SIZE = 16
MIN_RETRIES = 1

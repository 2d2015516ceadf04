"""Settings of the search_sync service."""

MIN_TTL = 300
PAGE_COUNT = 45
PAGE_DEPTH = 30
POOL_TTL = 900

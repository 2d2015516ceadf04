"""The search_sync service."""

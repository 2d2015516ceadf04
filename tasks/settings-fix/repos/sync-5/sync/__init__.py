"""The sync service."""

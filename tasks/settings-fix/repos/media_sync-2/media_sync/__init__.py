"""The media_sync service."""

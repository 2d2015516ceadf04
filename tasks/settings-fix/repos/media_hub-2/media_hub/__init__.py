"""The media_hub service."""

"""The media_web service."""

"""The media_pad service."""

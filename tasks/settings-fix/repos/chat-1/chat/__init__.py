"""The chat service."""

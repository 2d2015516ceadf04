"""The gateway service."""

"""environment service."""

"""scheduler service."""

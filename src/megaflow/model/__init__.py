"""model service."""

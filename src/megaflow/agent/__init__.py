"""agent service."""

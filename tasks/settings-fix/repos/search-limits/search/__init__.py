"""The search service."""

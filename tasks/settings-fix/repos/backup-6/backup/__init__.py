"""The backup service."""

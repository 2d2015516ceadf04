"""The auth service."""

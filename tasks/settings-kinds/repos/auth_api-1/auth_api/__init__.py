"""The auth_api service."""

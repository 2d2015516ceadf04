"""The inventory service."""

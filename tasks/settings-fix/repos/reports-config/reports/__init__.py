"""The reports service."""

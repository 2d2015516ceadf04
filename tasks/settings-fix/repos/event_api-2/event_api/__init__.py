"""The event_api service."""

"""The queue_api service."""

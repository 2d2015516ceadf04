"""The order_api service."""

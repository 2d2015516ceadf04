"""The order_run service."""

"""The order_core service."""

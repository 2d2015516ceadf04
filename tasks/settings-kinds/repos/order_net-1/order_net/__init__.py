"""The order_net service."""

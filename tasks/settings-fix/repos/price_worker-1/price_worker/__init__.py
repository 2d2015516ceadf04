"""The price_worker service."""

"""The route_worker service."""

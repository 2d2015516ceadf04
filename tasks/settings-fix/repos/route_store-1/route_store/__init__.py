"""The route_store service."""

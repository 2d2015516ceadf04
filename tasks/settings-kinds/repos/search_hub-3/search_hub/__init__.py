"""The search_hub service."""

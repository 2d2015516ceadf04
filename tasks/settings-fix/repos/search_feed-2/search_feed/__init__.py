"""The search_feed service."""

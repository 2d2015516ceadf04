"""The search_index service."""

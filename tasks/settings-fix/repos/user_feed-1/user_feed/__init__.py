"""The user_feed service."""

"""The chat_hub service."""

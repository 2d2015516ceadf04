"""The chat_desk service."""
